//! CLUSTER: the node is not a cluster member yet, but keys already live in
//! Redis Cluster hash slots, so `CLUSTER KEYSLOT` answers as a cluster node
//! does. Every other subcommand gets Redis's reply for a node without
//! cluster support.

use super::args::help;
use super::{CmdResult, CommandDef, Ctx, Keys, err};
use crate::base::eq_ic;
use crate::base::slot::key_slot;
use crate::protocol::Reply;

pub const COMMANDS: &[CommandDef] =
    &[CommandDef::new("cluster", -2, 0, Keys::None, cluster).acl("@slow").subs(CLUSTER_SUBS)];

pub const CLUSTER_SUBS: &[&str] = &["help", "keyslot"];

const CLUSTER_HELP: &[&str] = &[
    "CLUSTER <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "KEYSLOT <key>",
    "    Return the hash slot for <key>.",
    "HELP",
    "    Prints this help.",
];

const DISABLED: &str = "ERR This instance has cluster support disabled";

fn cluster(_ctx: &mut Ctx<'_>, args: &[&[u8]], out: &mut Reply) -> CmdResult {
    let sub = args[1];
    if eq_ic(sub, "keyslot") {
        if args.len() != 3 {
            return Err(err::arity("cluster|keyslot").into());
        }
        out.int(key_slot(args[2]) as i64);
    } else if eq_ic(sub, "help") && args.len() == 2 {
        help(out, CLUSTER_HELP);
    } else {
        return Err(DISABLED.into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn cluster_subcommands_have_metadata() {
        for s in super::CLUSTER_SUBS {
            assert!(super::super::subcommands::sub_def(&format!("cluster|{s}")).is_some(), "cluster|{s}");
        }
    }
}
