//! Commands: connection (being written).

use super::CommandDef;

pub const COMMANDS: &[CommandDef] = &[];
