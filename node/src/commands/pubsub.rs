//! Pub/sub: SUBSCRIBE, PSUBSCRIBE, PUBLISH and friends (being written).

use super::CommandDef;
use crate::server::Shared;
use crate::server::client::Client;

pub const COMMANDS: &[CommandDef] = &[];

/// Channel and pattern subscriptions of every client.
#[derive(Default)]
pub struct Hub {}

/// Drops all of a disconnecting client's subscriptions.
pub fn unsubscribe_all(_shared: &Shared, _client: &mut Client) {}
