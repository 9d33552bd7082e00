//! MULTI, EXEC, DISCARD, WATCH, UNWATCH (being written).

use super::CommandDef;
use crate::server::Shared;
use crate::server::client::Client;

pub const COMMANDS: &[CommandDef] = &[];

/// Forgets every key the client WATCHes.
pub fn unwatch_all(_shared: &Shared, _client: &mut Client) {}
