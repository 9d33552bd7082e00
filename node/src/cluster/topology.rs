//! The cluster's shape as the operator pushes it: an epoch, the nodes (id,
//! endpoints, slot ranges) and which one is this node. One model renders
//! every reply about the cluster (CLUSTER SHARDS / SLOTS / NODES, MOVED), so
//! they can never disagree.
//!
//! Wire and file form (`STRATA.TOPOLOGY SET <epoch> <myid> <node>...`): each
//! node is one string of six space-separated fields,
//! `<id> <ip> <hostname|-> <direct-port> <plain-port> <ranges|->`, ranges
//! comma-separated `a-b` or `a`.

use crate::base::slot::{SLOTS, SlotSet};
use std::sync::Arc;

/// No node serves the slot.
const UNASSIGNED: u16 = u16::MAX;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// 40 lowercase hex characters, stable across restarts of its pod.
    pub id: String,
    pub ip: String,
    pub hostname: Option<String>,
    /// Where cluster-aware clients connect: wrong-slot commands get MOVED.
    pub direct_port: u16,
    /// Where any client may connect: wrong-slot commands are forwarded.
    pub plain_port: u16,
    /// Where nodes forward to one another (and the operator pushes);
    /// `plain_port + 10000` unless the seventh field says otherwise.
    pub admin_port: u16,
    /// `ip:admin_port`, made once: forwarding names it per request.
    pub admin_addr: Arc<str>,
    /// Inclusive slot ranges, sorted.
    pub ranges: Vec<(u16, u16)>,
}

impl Member {
    pub fn slot_count(&self) -> usize {
        self.ranges.iter().map(|&(a, b)| (b - a) as usize + 1).sum()
    }

    /// The six-field form of the wire and the file.
    pub fn render(&self) -> String {
        let ranges = if self.ranges.is_empty() {
            "-".to_string()
        } else {
            self.ranges
                .iter()
                .map(|&(a, b)| if a == b { a.to_string() } else { format!("{a}-{b}") })
                .collect::<Vec<_>>()
                .join(",")
        };
        format!(
            "{} {} {} {} {} {} {}",
            self.id,
            self.ip,
            self.hostname.as_deref().unwrap_or("-"),
            self.direct_port,
            self.plain_port,
            ranges,
            self.admin_port
        )
    }

    pub fn parse(text: &str) -> Result<Member, String> {
        let fields: Vec<&str> = text.split_ascii_whitespace().collect();
        let (id, ip, hostname, direct, plain, ranges, admin) = match fields[..] {
            [id, ip, hostname, direct, plain, ranges] => (id, ip, hostname, direct, plain, ranges, None),
            [id, ip, hostname, direct, plain, ranges, admin] => (id, ip, hostname, direct, plain, ranges, Some(admin)),
            _ => {
                return Err(format!(
                    "a node needs 6 or 7 fields (id ip hostname direct-port plain-port slots [admin-port]), got '{text}'"
                ));
            }
        };
        if id.len() != 40 || !id.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
            return Err(format!("node id '{id}' is not 40 lowercase hex characters"));
        }
        if ip.is_empty() || ip.contains(',') || ip.contains('@') {
            return Err(format!("bad address '{ip}'"));
        }
        let port = |p: &str| p.parse::<u16>().ok().filter(|&p| p > 0).ok_or_else(|| format!("bad port '{p}'"));
        let mut parsed = Vec::new();
        if ranges != "-" {
            for r in ranges.split(',') {
                let slot = |s: &str| {
                    s.parse::<u16>().ok().filter(|&s| (s as usize) < SLOTS).ok_or_else(|| format!("bad slot '{s}'"))
                };
                let (a, b) = match r.split_once('-') {
                    Some((a, b)) => (slot(a)?, slot(b)?),
                    None => (slot(r)?, slot(r)?),
                };
                if a > b {
                    return Err(format!("bad slot range '{r}'"));
                }
                parsed.push((a, b));
            }
        }
        parsed.sort_unstable();
        let plain_port = port(plain)?;
        let admin_port = match admin {
            Some(a) => port(a)?,
            None => plain_port.checked_add(10000).ok_or_else(|| format!("no admin port for plain port {plain}"))?,
        };
        Ok(Member {
            id: id.to_string(),
            ip: ip.to_string(),
            hostname: (hostname != "-").then(|| hostname.to_string()),
            direct_port: port(direct)?,
            plain_port,
            admin_port,
            admin_addr: format!("{ip}:{admin_port}").into(),
            ranges: parsed,
        })
    }
}

#[derive(Debug, Clone)]
pub struct Topology {
    pub epoch: u64,
    /// Index of this node in `members`.
    pub myself: usize,
    pub members: Vec<Member>,
    /// Slot → index in `members` (`UNASSIGNED`: nobody).
    owner: Box<[u16]>,
    covered: usize,
    /// Migrations this node took part in that changed the pushed layout
    /// (or may have): kept until a pushed epoch agrees with them.
    pub moves: Vec<Move>,
    /// Recent migrations a pushed epoch has confirmed (a source that
    /// restarted in the middle of its handover asks about them).
    pub confirmed: Vec<String>,
}

/// How many confirmed migrations a node remembers.
const CONFIRMED_KEPT: usize = 64;

/// A migration of slots between two members, as this node recorded it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Move {
    pub mid: String,
    /// Member ids.
    pub from: String,
    pub to: String,
    pub slots: SlotSet,
    pub state: MoveState,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MoveState {
    /// The source sent (or was about to send) the commit: whether the
    /// target committed is not known yet. The source serves none of the
    /// slots until it knows.
    Handover,
    /// The target has the slots: the layout above already shows them moved.
    Committed,
}

impl Move {
    fn render(&self) -> String {
        let state = match self.state {
            MoveState::Handover => "handover",
            MoveState::Committed => "committed",
        };
        format!("move {} {} {} {} {}", self.mid, self.from, self.to, self.slots.render(), state)
    }

    fn parse(line: &str) -> Result<Move, String> {
        let f: Vec<&str> = line.split_ascii_whitespace().collect();
        let ["move", mid, from, to, slots, state] = f[..] else { return Err(format!("bad move line '{line}'")) };
        let state = match state {
            "handover" => MoveState::Handover,
            "committed" => MoveState::Committed,
            _ => return Err(format!("bad move state '{state}'")),
        };
        Ok(Move { mid: mid.into(), from: from.into(), to: to.into(), slots: SlotSet::parse(slots)?, state })
    }
}

/// Where a slot's commands go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    Mine,
    /// Another member (index) serves it.
    Elsewhere(usize),
    Unassigned,
}

impl PartialEq for Topology {
    fn eq(&self, other: &Self) -> bool {
        self.epoch == other.epoch && self.myself == other.myself && self.members == other.members
    }
}

impl Topology {
    /// Builds and checks a topology: ids unique, slot ranges disjoint,
    /// `myid` one of the members.
    pub fn new(epoch: u64, myid: &str, members: Vec<Member>) -> Result<Topology, String> {
        if epoch == 0 {
            return Err("the epoch must be at least 1".into());
        }
        if members.is_empty() {
            return Err("no nodes".into());
        }
        if members.len() >= UNASSIGNED as usize {
            return Err("too many nodes".into());
        }
        let mut owner = vec![UNASSIGNED; SLOTS].into_boxed_slice();
        for (i, m) in members.iter().enumerate() {
            if members[..i].iter().any(|o| o.id == m.id) {
                return Err(format!("node id {} appears twice", m.id));
            }
            for &(a, b) in &m.ranges {
                for slot in a..=b {
                    let o = &mut owner[slot as usize];
                    if *o != UNASSIGNED {
                        return Err(format!("slot {slot} is given to {} and {}", members[*o as usize].id, m.id));
                    }
                    *o = i as u16;
                }
            }
        }
        let myself = members
            .iter()
            .position(|m| m.id == myid)
            .ok_or_else(|| format!("this node's id {myid} is not a member"))?;
        let covered = owner.iter().filter(|&&o| o != UNASSIGNED).count();
        Ok(Topology { epoch, myself, members, owner, covered, moves: Vec::new(), confirmed: Vec::new() })
    }

    /// The id of the member serving `slot`, if any.
    pub fn owner_id(&self, slot: u16) -> Option<&str> {
        match self.owner[slot as usize] {
            UNASSIGNED => None,
            o => Some(&self.members[o as usize].id),
        }
    }

    /// This layout with `slots` given to member `to` (same epoch): what a
    /// committed migration makes of it until the operator pushes the next.
    pub fn with_slots_moved(&self, slots: &SlotSet, to: &str) -> Result<Topology, String> {
        let mut members = self.members.clone();
        for m in &mut members {
            let mine = SlotSet::from_ranges(&m.ranges);
            let keep = |s: u16| {
                if m.id == to { mine.contains(s) || slots.contains(s) } else { mine.contains(s) && !slots.contains(s) }
            };
            let kept: Vec<(u16, u16)> = (0..SLOTS as u16).filter(|&s| keep(s)).map(|s| (s, s)).collect();
            m.ranges = SlotSet::from_ranges(&kept).ranges();
        }
        if !members.iter().any(|m| m.id == to) {
            return Err(format!("unknown node {to}"));
        }
        let mut t = Topology::new(self.epoch, &self.me().id, members)?;
        t.moves = self.moves.clone();
        t.confirmed = self.confirmed.clone();
        Ok(t)
    }

    /// Checks a pushed topology against the migrations this one records:
    /// one that gives a committed migration's slots to anyone but its
    /// target would make two nodes accept writes to them. The pushed one
    /// is returned with what it confirms remembered.
    pub fn carry_moves_into(&self, mut new: Topology) -> Result<Topology, String> {
        new.confirmed = self.confirmed.clone();
        for m in &self.moves {
            match m.state {
                MoveState::Handover => {
                    return Err(format!(
                        "migration {} of slots {} is in its handover (this node is finding out whether {} committed it); push again in a moment",
                        m.mid,
                        m.slots.render(),
                        m.to
                    ));
                }
                MoveState::Committed => {
                    if let Some(s) = m.slots.iter().find(|&s| new.owner_id(s) != Some(m.to.as_str())) {
                        return Err(format!(
                            "slot {s} moved to {} in migration {}; push a topology that includes it",
                            m.to, m.mid
                        ));
                    }
                    new.confirmed.push(m.mid.clone());
                }
            }
        }
        let extra = new.confirmed.len().saturating_sub(CONFIRMED_KEPT);
        new.confirmed.drain(..extra);
        Ok(new)
    }

    /// `STRATA.TOPOLOGY SET`'s arguments after SET: epoch, myid, nodes.
    pub fn parse_args(args: &[&[u8]]) -> Result<Topology, String> {
        let text = |a: &[u8]| std::str::from_utf8(a).map(str::to_string).map_err(|_| "not UTF-8".to_string());
        let [epoch, myid, nodes @ ..] = args else {
            return Err("expected <epoch> <myid> <node>...".into());
        };
        let epoch = text(epoch)?.parse::<u64>().map_err(|_| "the epoch is not a number".to_string())?;
        let members = nodes.iter().map(|n| Member::parse(&text(n)?)).collect::<Result<Vec<_>, _>>()?;
        Topology::new(epoch, &text(myid)?, members)
    }

    pub fn route(&self, slot: u16) -> Route {
        match self.owner[slot as usize] {
            UNASSIGNED => Route::Unassigned,
            o if o as usize == self.myself => Route::Mine,
            o => Route::Elsewhere(o as usize),
        }
    }

    pub fn me(&self) -> &Member {
        &self.members[self.myself]
    }

    /// Slots some node serves.
    pub fn covered(&self) -> usize {
        self.covered
    }

    pub fn fully_covered(&self) -> bool {
        self.covered == SLOTS
    }

    /// The file form: a header line, then one member per line.
    pub fn to_file(&self) -> String {
        let mut s = format!("strata-topology 1 epoch {} myself {}\n", self.epoch, self.me().id);
        for m in &self.members {
            s.push_str(&m.render());
            s.push('\n');
        }
        for m in &self.moves {
            s.push_str(&m.render());
            s.push('\n');
        }
        for mid in &self.confirmed {
            s.push_str(&format!("confirmed {mid}\n"));
        }
        s
    }

    pub fn from_file(text: &str) -> Result<Topology, String> {
        let mut lines = text.lines().filter(|l| !l.trim().is_empty());
        let header: Vec<&str> = lines.next().unwrap_or("").split_ascii_whitespace().collect();
        let ["strata-topology", "1", "epoch", epoch, "myself", myid] = header[..] else {
            return Err("not a topology file (bad header)".into());
        };
        let epoch = epoch.parse::<u64>().map_err(|_| "bad epoch in header".to_string())?;
        let (mut members, mut moves, mut confirmed) = (Vec::new(), Vec::new(), Vec::new());
        for line in lines {
            if line.starts_with("move ") {
                moves.push(Move::parse(line)?);
            } else if let Some(mid) = line.strip_prefix("confirmed ") {
                confirmed.push(mid.trim().to_string());
            } else {
                members.push(Member::parse(line)?);
            }
        }
        let mut t = Topology::new(epoch, myid, members)?;
        t.moves = moves;
        t.confirmed = confirmed;
        Ok(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: u8) -> String {
        format!("{:040x}", n)
    }

    fn three() -> Vec<Member> {
        let m = |n: u8, a: u16, b: u16| Member {
            id: id(n),
            ip: "127.0.0.1".into(),
            hostname: if n == 1 { Some("pod-1.svc".into()) } else { None },
            direct_port: 7100 + n as u16,
            plain_port: 7000 + n as u16,
            admin_port: 7200 + n as u16,
            admin_addr: format!("127.0.0.1:{}", 7200 + n as u16).into(),
            ranges: vec![(a, b)],
        };
        vec![m(0, 0, 5460), m(1, 5461, 10922), m(2, 10923, 16383)]
    }

    #[test]
    fn routes_by_owner() {
        let t = Topology::new(3, &id(1), three()).unwrap();
        assert_eq!(t.route(0), Route::Elsewhere(0));
        assert_eq!(t.route(5461), Route::Mine);
        assert_eq!(t.route(16383), Route::Elsewhere(2));
        assert_eq!(t.covered(), SLOTS);
        let mut partial = three();
        partial[2].ranges = vec![(10923, 16000)];
        let t = Topology::new(3, &id(1), partial).unwrap();
        assert_eq!(t.route(16001), Route::Unassigned);
        assert_eq!(t.covered(), 16001);
    }

    #[test]
    fn refuses_overlaps_duplicates_and_strangers() {
        let mut m = three();
        m[1].ranges = vec![(5000, 10922)];
        assert!(Topology::new(1, &id(1), m).unwrap_err().contains("slot 5000"));
        let mut m = three();
        m[2].id = id(1);
        assert!(Topology::new(1, &id(1), m).unwrap_err().contains("twice"));
        assert!(Topology::new(1, &id(9), three()).unwrap_err().contains("not a member"));
        assert!(Topology::new(0, &id(1), three()).is_err());
        assert!(Member::parse("abc 1.2.3.4 - 1 2 0-1").is_err());
        assert!(Member::parse(&format!("{} 1.2.3.4 - 1 2 0-16384", id(1))).is_err());
        assert!(Member::parse(&format!("{} 1.2.3.4 - 1 2 9-3", id(1))).is_err());
    }

    #[test]
    fn a_committed_move_reassigns_slots_and_only_an_agreeing_push_replaces_it() {
        let t = Topology::new(3, &id(0), three()).unwrap();
        let moved = SlotSet::parse("0-9").unwrap();
        let mut amended = t.with_slots_moved(&moved, &id(2)).unwrap();
        assert_eq!(amended.route(5), Route::Elsewhere(2));
        assert_eq!(amended.route(10), Route::Mine);
        assert_eq!(amended.me().ranges, vec![(10, 5460)]);
        amended.moves.push(Move {
            mid: "m1".into(),
            from: id(0),
            to: id(2),
            slots: moved.clone(),
            state: MoveState::Committed,
        });
        let back = Topology::from_file(&amended.to_file()).unwrap();
        assert_eq!(back.moves, amended.moves);
        // A push that ignores the move is refused; one that has it confirms it.
        let stale = Topology::new(4, &id(0), three()).unwrap();
        assert!(amended.carry_moves_into(stale).unwrap_err().contains("migration m1"));
        let mut agreeing = three();
        agreeing[0].ranges = vec![(10, 5460)];
        agreeing[2].ranges = vec![(0, 9), (10923, 16383)];
        let pushed = amended.carry_moves_into(Topology::new(4, &id(0), agreeing).unwrap()).unwrap();
        assert!(pushed.moves.is_empty());
        assert_eq!(pushed.confirmed, vec!["m1".to_string()]);
        amended.moves[0].state = MoveState::Handover;
        assert!(amended.carry_moves_into(pushed).unwrap_err().contains("handover"));
    }

    #[test]
    fn wire_and_file_forms_round_trip() {
        let t = Topology::new(7, &id(2), three()).unwrap();
        let back = Topology::from_file(&t.to_file()).unwrap();
        assert_eq!(back, t);
        let rendered: Vec<String> = t.members.iter().map(Member::render).collect();
        let myid = id(2);
        let mut args: Vec<&[u8]> = vec![b"7", myid.as_bytes()];
        args.extend(rendered.iter().map(|s| s.as_bytes()));
        assert_eq!(Topology::parse_args(&args).unwrap(), t);
        let single = Member::parse(&format!("{} 10.0.0.1 - 6380 6379 5,7-9", id(4))).unwrap();
        assert_eq!(single.ranges, vec![(5, 5), (7, 9)]);
        assert_eq!(single.slot_count(), 4);
        assert!(single.render().ends_with(" 5,7-9 16379"), "the admin port defaults to plain + 10000");
    }
}
