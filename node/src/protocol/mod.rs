//! RESP2/RESP3 wire protocol: request parsing and reply encoding.

pub mod frame;
mod parser;
mod reply;

pub use parser::{
    FIXED_ERRORS, Limits, Parse, ProtoError, Request, expected_dollar, is_cross_protocol_attack, parse_request,
    split_quoted,
};
pub use reply::{ErrorText, Reply, format_double, format_g};
