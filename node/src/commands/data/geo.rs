//! Commands: geo — GEOADD, GEOPOS, GEODIST, GEOHASH, GEOSEARCH(STORE),
//! GEORADIUS(BYMEMBER) and their _RO forms — on sorted sets whose scores
//! are Redis's 52-bit geohashes (see `base::geohash`), with Redis 7.0's
//! argument rules, errors and number formatting.

use super::typed::read_value;
use super::zsets::zadd;
use crate::base::eq_ic;
use crate::base::geohash::{self, Search, Shape};
use crate::base::strtod::parse_score;
use crate::commands::{CmdError, CmdResult, CommandDef, Ctx, Keys, arg_i64, err, flags};
use crate::config::keyspace_events as ev;
use crate::protocol::Reply;
use crate::store::Value;
use crate::store::zset::{ScoreRange, ZSetValue};
use smallvec::SmallVec;

const W: u32 = flags::WRITE;
const R: u32 = flags::READONLY;
const DENYOOM: u32 = flags::DENYOOM;

pub const COMMANDS: &[CommandDef] = &[
    CommandDef::new("geoadd", -5, W | DENYOOM, Keys::Range(1, 1, 1), geoadd).acl("@write @geo @slow"),
    CommandDef::new("geopos", -2, R, Keys::Range(1, 1, 1), geopos).acl("@read @geo @slow"),
    CommandDef::new("geodist", -4, R, Keys::Range(1, 1, 1), geodist).acl("@read @geo @slow"),
    CommandDef::new("geohash", -2, R, Keys::Range(1, 1, 1), geohash_cmd).acl("@read @geo @slow"),
    CommandDef::new("georadius", -6, W | DENYOOM, Keys::Custom(georadius_keys), georadius).acl("@write @geo @slow"),
    CommandDef::new("georadius_ro", -6, R, Keys::Range(1, 1, 1), georadius_ro).acl("@read @geo @slow"),
    CommandDef::new("georadiusbymember", -5, W | DENYOOM, Keys::Custom(georadius_keys), georadiusbymember)
        .acl("@write @geo @slow"),
    CommandDef::new("georadiusbymember_ro", -5, R, Keys::Range(1, 1, 1), georadiusbymember_ro).acl("@read @geo @slow"),
    CommandDef::new("geosearch", -7, R, Keys::Range(1, 1, 1), geosearch).acl("@read @geo @slow"),
    CommandDef::new("geosearchstore", -8, W | DENYOOM, Keys::Range(1, 2, 1), geosearchstore).acl("@write @geo @slow"),
];

/// GEORADIUS[BYMEMBER]: the source, then the keys after STORE and
/// STOREDIST. Redis's key specs name the first of each (COMMAND GETKEYS);
/// the command writes the last one given, so every one is locked.
fn georadius_keys(args: &[&[u8]]) -> SmallVec<[usize; 8]> {
    let mut keys = SmallVec::new();
    keys.push(1);
    let mut i = 5;
    while i + 1 < args.len() {
        if eq_ic(args[i], "store") || eq_ic(args[i], "storedist") {
            keys.push(i + 1);
            i += 1;
        }
        i += 1;
    }
    keys
}

// ---------------------------------------------------------------------------
// Replies and argument parsing
// ---------------------------------------------------------------------------

/// A distance as Redis 7.0 replies it: `%.4f`, a bulk string in RESP3 too.
fn reply_distance(out: &mut Reply, d: f64) {
    out.bulk(format!("{d:.4}").as_bytes());
}

/// A coordinate as Redis's `addReplyHumanLongDouble`: `%.17Lf` without
/// trailing zeros; a bulk string in RESP2, a double in RESP3.
fn reply_coord(out: &mut Reply, d: f64) {
    let mut s = format!("{d:.17}");
    if s.contains('.') {
        s.truncate(s.trim_end_matches('0').trim_end_matches('.').len());
    }
    if s == "-0" {
        s = "0".into();
    }
    if out.resp3 {
        out.raw(b",");
        out.raw(s.as_bytes());
        out.raw(b"\r\n");
    } else {
        out.bulk(s.as_bytes());
    }
}

fn parse_double(arg: &[u8], msg: &'static str) -> Result<f64, CmdError> {
    parse_score(arg).ok_or(CmdError::from(msg))
}

/// A longitude, latitude pair inside Redis's valid ranges.
fn parse_lon_lat(args: &[&[u8]]) -> Result<(f64, f64), CmdError> {
    let lon = parse_double(args[0], err::NOT_FLOAT)?;
    let lat = parse_double(args[1], err::NOT_FLOAT)?;
    if !(geohash::LONG_MIN..=geohash::LONG_MAX).contains(&lon) || !(geohash::LAT_MIN..=geohash::LAT_MAX).contains(&lat)
    {
        return Err(format!("ERR invalid longitude,latitude pair {lon:.6},{lat:.6}").into());
    }
    Ok((lon, lat))
}

/// Metres per unit.
fn parse_unit(arg: &[u8]) -> Result<f64, CmdError> {
    match () {
        _ if eq_ic(arg, "m") => Ok(1.0),
        _ if eq_ic(arg, "km") => Ok(1000.0),
        _ if eq_ic(arg, "ft") => Ok(0.3048),
        _ if eq_ic(arg, "mi") => Ok(1609.34),
        _ => Err("ERR unsupported unit provided. please use M, KM, FT, MI".into()),
    }
}

/// `<radius> <unit>`: (radius, metres per unit).
fn parse_radius(args: &[&[u8]]) -> Result<(f64, f64), CmdError> {
    let r = parse_double(args[0], "ERR need numeric radius")?;
    if r < 0.0 {
        return Err("ERR radius cannot be negative".into());
    }
    Ok((r, parse_unit(args[1])?))
}

/// `<width> <height> <unit>`.
fn parse_box(args: &[&[u8]]) -> Result<(f64, f64, f64), CmdError> {
    let w = parse_double(args[0], "ERR need numeric width")?;
    let h = parse_double(args[1], "ERR need numeric height")?;
    if h < 0.0 || w < 0.0 {
        return Err("ERR height or width cannot be negative".into());
    }
    Ok((w, h, parse_unit(args[2])?))
}

// ---------------------------------------------------------------------------
// GEOADD, GEOPOS, GEODIST, GEOHASH
// ---------------------------------------------------------------------------

/// GEOADD turns its triples into a ZADD of geohash scores, as Redis does.
fn geoadd(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let (mut xx, mut nx) = (false, false);
    let mut idx = 2;
    while idx < args.len() {
        let a = args[idx];
        if eq_ic(a, "nx") {
            nx = true;
        } else if eq_ic(a, "xx") {
            xx = true;
        } else if !eq_ic(a, "ch") {
            break;
        }
        idx += 1;
    }
    if (args.len() - idx) % 3 != 0 || (xx && nx) {
        return Err(err::SYNTAX.into());
    }
    let mut scores = Vec::with_capacity((args.len() - idx) / 3);
    for triple in args[idx..].chunks_exact(3) {
        let (lon, lat) = parse_lon_lat(triple)?;
        let bits = geohash::encode(lon, lat).map_or(0, |h| h.bits);
        scores.push(bits.to_string());
    }
    let mut zargs: Vec<&[u8]> = Vec::with_capacity(idx + scores.len() * 2);
    zargs.push(b"zadd");
    zargs.extend_from_slice(&args[1..idx]);
    for (score, triple) in scores.iter().zip(args[idx..].chunks_exact(3)) {
        zargs.push(score.as_bytes());
        zargs.push(triple[2]);
    }
    zadd(ctx, &zargs, out)
}

fn geopos(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let z = read_value::<ZSetValue>(&mut ctx.keys, args[1])?;
    out.array(args.len() - 2);
    for m in &args[2..] {
        match z.and_then(|z| z.score(m)) {
            None => out.null_array(),
            Some(score) => {
                let (lon, lat) = geohash::decode_score(score);
                out.array(2);
                reply_coord(out, lon);
                reply_coord(out, lat);
            }
        }
    }
    Ok(())
}

fn geodist(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let to_meter = match args.len() {
        5 => parse_unit(args[4])?,
        n if n > 5 => return Err(err::SYNTAX.into()),
        _ => 1.0,
    };
    let Some(z) = read_value::<ZSetValue>(&mut ctx.keys, args[1])? else {
        out.null();
        return Ok(());
    };
    match (z.score(args[2]), z.score(args[3])) {
        (Some(a), Some(b)) => {
            let (lon1, lat1) = geohash::decode_score(a);
            let (lon2, lat2) = geohash::decode_score(b);
            reply_distance(out, geohash::distance(lon1, lat1, lon2, lat2) / to_meter);
        }
        _ => out.null(),
    }
    Ok(())
}

fn geohash_cmd(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let z = read_value::<ZSetValue>(&mut ctx.keys, args[1])?;
    out.array(args.len() - 2);
    for m in &args[2..] {
        match z.and_then(|z| z.score(m)) {
            None => out.null(),
            Some(score) => out.bulk(&geohash::geohash_string(score)),
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// GEOSEARCH, GEORADIUS and friends: Redis's `georadiusGeneric`
// ---------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq)]
enum Variant {
    /// GEORADIUS[_RO]: centre and radius given as coordinates.
    Coords,
    /// GEORADIUSBYMEMBER[_RO].
    Member,
    /// GEOSEARCH / GEOSEARCHSTORE.
    Search,
}

struct GeoArgs {
    variant: Variant,
    src: usize,
    /// STORE and STOREDIST are accepted (not the _RO forms).
    can_store: bool,
    store_cmd: bool,
}

fn georadius(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    geo_generic(ctx, args, out, GeoArgs { variant: Variant::Coords, src: 1, can_store: true, store_cmd: false })
}
fn georadius_ro(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    geo_generic(ctx, args, out, GeoArgs { variant: Variant::Coords, src: 1, can_store: false, store_cmd: false })
}
fn georadiusbymember(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    geo_generic(ctx, args, out, GeoArgs { variant: Variant::Member, src: 1, can_store: true, store_cmd: false })
}
fn georadiusbymember_ro(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    geo_generic(ctx, args, out, GeoArgs { variant: Variant::Member, src: 1, can_store: false, store_cmd: false })
}
fn geosearch(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    geo_generic(ctx, args, out, GeoArgs { variant: Variant::Search, src: 1, can_store: false, store_cmd: false })
}
fn geosearchstore(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    geo_generic(ctx, args, out, GeoArgs { variant: Variant::Search, src: 2, can_store: false, store_cmd: true })
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Order {
    None,
    Asc,
    Desc,
}

struct Found {
    member: Box<[u8]>,
    score: f64,
    dist: f64,
    lon: f64,
    lat: f64,
}

fn member_position(z: &ZSetValue, member: &[u8]) -> Result<(f64, f64), CmdError> {
    z.score(member).map(geohash::decode_score).ok_or(CmdError::from("ERR could not decode requested zset member"))
}

fn geo_generic(ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply, g: GeoArgs) -> CmdResult {
    let z = read_value::<ZSetValue>(&mut ctx.keys, args[g.src])?;
    let mut center: Option<(f64, f64)> = None;
    let mut shape: Option<(Shape, f64)> = None;
    let mut store: Option<&[u8]> = None;
    let mut storedist = false;
    let base = match g.variant {
        Variant::Coords => {
            center = Some(parse_lon_lat(&args[2..4])?);
            let (r, conv) = parse_radius(&args[4..6])?;
            shape = Some((Shape::Radius(r), conv));
            6
        }
        Variant::Member => {
            // Without the source key the arguments are still parsed, so
            // the reply shape (STORE or not) is right.
            if let Some(z) = z {
                center = Some(member_position(z, args[2])?);
                let (r, conv) = parse_radius(&args[3..5])?;
                shape = Some((Shape::Radius(r), conv));
            }
            5
        }
        Variant::Search => {
            if g.store_cmd {
                store = Some(args[1]);
            }
            g.src + 1
        }
    };
    let search = g.variant == Variant::Search;
    let (mut withdist, mut withhash, mut withcoord, mut any) = (false, false, false, false);
    let (mut frommember, mut fromloc, mut byradius, mut bybox) = (false, false, false, false);
    let mut order = Order::None;
    let mut count: i64 = 0;
    let mut i = base;
    while i < args.len() {
        let a = args[i];
        let left = args.len() - i - 1;
        if eq_ic(a, "withdist") {
            withdist = true;
        } else if eq_ic(a, "withhash") {
            withhash = true;
        } else if eq_ic(a, "withcoord") {
            withcoord = true;
        } else if eq_ic(a, "any") {
            any = true;
        } else if eq_ic(a, "asc") {
            order = Order::Asc;
        } else if eq_ic(a, "desc") {
            order = Order::Desc;
        } else if eq_ic(a, "count") && left >= 1 {
            count = arg_i64(args[i + 1])?;
            if count <= 0 {
                return Err("ERR COUNT must be > 0".into());
            }
            i += 1;
        } else if (eq_ic(a, "store") || eq_ic(a, "storedist")) && left >= 1 && g.can_store {
            store = Some(args[i + 1]);
            storedist = eq_ic(a, "storedist");
            i += 1;
        } else if eq_ic(a, "storedist") && g.store_cmd {
            storedist = true;
        } else if eq_ic(a, "frommember") && left >= 1 && search && !fromloc {
            if let Some(z) = z {
                center = Some(member_position(z, args[i + 1])?);
            }
            frommember = true;
            i += 1;
        } else if eq_ic(a, "fromlonlat") && left >= 2 && search && !frommember {
            center = Some(parse_lon_lat(&args[i + 1..i + 3])?);
            fromloc = true;
            i += 2;
        } else if eq_ic(a, "byradius") && left >= 2 && search && !bybox {
            let (r, conv) = parse_radius(&args[i + 1..i + 3])?;
            shape = Some((Shape::Radius(r), conv));
            byradius = true;
            i += 2;
        } else if eq_ic(a, "bybox") && left >= 3 && search && !byradius {
            let (w, h, conv) = parse_box(&args[i + 1..i + 4])?;
            shape = Some((Shape::Box { width: w, height: h }, conv));
            bybox = true;
            i += 3;
        } else {
            return Err(err::SYNTAX.into());
        }
        i += 1;
    }
    if store.is_some() && (withdist || withhash || withcoord) {
        let what = if g.store_cmd { "GEOSEARCHSTORE" } else { "STORE option in GEORADIUS" };
        return Err(format!("ERR {what} is not compatible with WITHDIST, WITHHASH and WITHCOORD options").into());
    }
    let name = String::from_utf8_lossy(args[0]);
    if search && !(frommember || fromloc) {
        return Err(format!("ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for {name}").into());
    }
    if search && !(byradius || bybox) {
        return Err(format!("ERR exactly one of BYRADIUS and BYBOX can be specified for {name}").into());
    }
    if any && count == 0 {
        return Err("ERR the ANY argument requires COUNT argument".into());
    }
    let Some(z) = z else {
        match store {
            Some(dst) => {
                if ctx.keys.delete(dst) {
                    ctx.notify(ev::GENERIC, "del", dst);
                }
                out.int(0);
            }
            None => out.array(0),
        }
        return Ok(());
    };
    let ((lon, lat), (shape, conversion)) = (center.expect("set with the key"), shape.expect("set with the key"));
    if count != 0 && order == Order::None && !any {
        order = Order::Asc;
    }
    let s = Search { lon, lat, shape, conversion };
    let limit = if any { count as usize } else { 0 };
    let mut found = points_in_cells(z, &s, limit);
    if found.is_empty() && store.is_none() {
        out.array(0);
        return Ok(());
    }
    match order {
        Order::Asc => found.sort_by(|a, b| a.dist.total_cmp(&b.dist)),
        Order::Desc => found.sort_by(|a, b| b.dist.total_cmp(&a.dist)),
        Order::None => {}
    }
    if count > 0 {
        found.truncate(count as usize);
    }
    for f in &mut found {
        f.dist /= conversion;
    }
    let Some(dst) = store else {
        let options = usize::from(withdist) + usize::from(withhash) + usize::from(withcoord);
        out.array(found.len());
        for f in &found {
            if options > 0 {
                out.array(options + 1);
            }
            out.bulk(&f.member);
            if withdist {
                reply_distance(out, f.dist);
            }
            if withhash {
                out.int(f.score as i64);
            }
            if withcoord {
                out.array(2);
                reply_coord(out, f.lon);
                reply_coord(out, f.lat);
            }
        }
        return Ok(());
    };
    if found.is_empty() {
        if ctx.keys.delete(dst) {
            ctx.notify(ev::GENERIC, "del", dst);
        }
    } else {
        let max_len = found.iter().map(|f| f.member.len()).max().unwrap_or(0);
        let mut result = ZSetValue::with_encoding_for(found.len(), max_len);
        for f in &found {
            result.insert(&f.member, if storedist { f.dist } else { f.score });
        }
        ctx.keys.set(dst, Value::ZSet(result), 0, false);
        let event = if eq_ic(args[0], "geosearchstore") { "geosearchstore" } else { "georadiusstore" };
        ctx.notify(ev::ZSET, event, dst);
    }
    out.int(found.len() as i64);
    Ok(())
}

/// Members inside the search shape, scanning the cells Redis scans in its
/// order; with `limit` (ANY) it stops once that many were found.
fn points_in_cells(z: &ZSetValue, s: &Search, limit: usize) -> Vec<Found> {
    let mut found = Vec::new();
    let full = |found: &Vec<Found>| limit != 0 && found.len() >= limit;
    for cell in geohash::search_cells(s) {
        if full(&found) {
            break;
        }
        let (min, max) = cell.score_range();
        let range = ScoreRange { min: min as f64, max: max as f64, min_ex: false, max_ex: true };
        let Some(start) = z.first_in_score_range(&range) else {
            continue;
        };
        for (member, score) in z.iter_from(start, false) {
            if !range.lte_max(score) {
                break;
            }
            let (plon, plat) = geohash::decode_score(score);
            if let Some(dist) = geohash::within(s, plon, plat) {
                found.push(Found { member: member.into(), score, dist, lon: plon, lat: plat });
                if full(&found) {
                    break;
                }
            }
        }
    }
    found
}
