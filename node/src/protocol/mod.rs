//! RESP2/RESP3 wire protocol: request parsing and reply encoding.

mod parser;
mod reply;

pub use parser::{Limits, Parse, Request, parse_request, split_quoted};
pub use reply::{Reply, format_double, format_g};
