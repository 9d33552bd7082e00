//! Commands: sets (being written).

use super::CommandDef;

pub const COMMANDS: &[CommandDef] = &[];
