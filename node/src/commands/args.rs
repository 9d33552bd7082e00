//! Argument parsing and replies shared by every command family: numbers,
//! blocking timeouts, subcommand resolution, HELP replies and the quoting
//! of arguments in error messages.

use super::{CmdError, err};
use crate::base::eq_ic;
use crate::protocol::Reply;

/// An argument for an error message (Redis quotes at most 128 bytes).
pub fn lossy(a: &[u8]) -> String {
    String::from_utf8_lossy(&a[..a.len().min(128)]).into_owned()
}

/// Resolves `args[1]` among a container's `supported` subcommands, with
/// Redis's error for one it lacks; returns the lower-case subcommand name.
/// (Its arity was checked by the pipeline's admission, from every origin.)
pub fn subcommand(container: &str, supported: &[&'static str], args: &[&[u8]]) -> Result<&'static str, CmdError> {
    let given = args[1];
    let Some(&name) = supported.iter().find(|s| eq_ic(given, s)) else {
        return Err(
            format!("ERR unknown subcommand '{}'. Try {} HELP.", lossy(given), container.to_ascii_uppercase()).into()
        );
    };
    Ok(name)
}

/// An argument as C code sees it: up to the first NUL. Redis compares option
/// keywords and patterns with C string functions, so "NX\0junk" is NX to it.
#[inline]
pub fn c_str(arg: &[u8]) -> &[u8] {
    arg.iter().position(|&b| b == 0).map_or(arg, |n| &arg[..n])
}

/// Writes a HELP reply: an array of status lines.
pub fn help(out: &mut Reply, lines: &[&str]) {
    out.array(lines.len());
    for l in lines {
        out.simple(l);
    }
}

/// Parses a blocking timeout in seconds (float allowed) into an absolute
/// deadline in unix ms (0 = block forever), as Redis 7.0 does: the value
/// times 1000 is truncated toward zero (so `0.0001` and `-0.0001` mean
/// forever), and values too large for a 64-bit millisecond count end up
/// negative there, hence "timeout is negative".
pub fn parse_block_timeout(arg: &[u8], now_ms: u64) -> Result<u64, CmdError> {
    let secs = crate::base::parse_f64(arg).ok_or(CmdError::from(err::TIMEOUT_NOT_FLOAT))?;
    let ms = secs * 1000.0;
    let tval: i64 = if ms.is_finite() && ms.abs() < 9.2e18 { ms as i64 } else { i64::MIN };
    if tval < 0 {
        return Err(err::TIMEOUT_NEG.into());
    }
    if tval == 0 {
        return Ok(0);
    }
    now_ms
        .checked_add(tval as u64)
        .filter(|&d| d <= i64::MAX as u64)
        .ok_or(CmdError::from("ERR timeout is out of range"))
}

/// Parses an integer argument or fails with Redis's "not an integer" error.
pub fn arg_i64(arg: &[u8]) -> Result<i64, CmdError> {
    crate::base::parse_i64(arg).ok_or(CmdError::from(err::NOT_INT))
}

/// Parses a float argument or fails with Redis's "not a valid float" error.
pub fn arg_f64(arg: &[u8]) -> Result<f64, CmdError> {
    crate::base::parse_f64(arg).ok_or(CmdError::from(err::NOT_FLOAT))
}
