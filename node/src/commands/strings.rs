//! Commands: strings (being written).

use super::CommandDef;

pub const COMMANDS: &[CommandDef] = &[];
