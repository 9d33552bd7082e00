//! Typed access to a key's value: the check every collection family makes
//! before it reads or writes — the value of its own type, or WRONGTYPE.

use crate::commands::{CmdError, CmdResult, Ctx, err};
use crate::config::keyspace_events as ev;
use crate::protocol::Reply;
use crate::store::hash::HashValue;
use crate::store::list::ListValue;
use crate::store::set::SetValue;
use crate::store::zset::ZSetValue;
use crate::store::{Changed, EntryMut, KeyAccess, Value, ValueRef};

/// A value type commands work on, picked out of a `Value`.
pub trait TypedValue: Sized {
    fn of(v: ValueRef<'_>) -> Option<&Self>;
    fn of_mut(v: &mut Value) -> Option<&mut Self>;
    fn is_empty(&self) -> bool;
}

macro_rules! typed_value {
    ($ty:ty, $variant:ident) => {
        impl TypedValue for $ty {
            fn of(v: ValueRef<'_>) -> Option<&Self> {
                if let ValueRef::$variant(x) = v { Some(x) } else { None }
            }

            fn of_mut(v: &mut Value) -> Option<&mut Self> {
                if let Value::$variant(x) = v { Some(x) } else { None }
            }

            fn is_empty(&self) -> bool {
                <$ty>::is_empty(self)
            }
        }
    };
}

typed_value!(HashValue, Hash);
typed_value!(ListValue, List);
typed_value!(SetValue, Set);
typed_value!(ZSetValue, ZSet);

/// The value at `key` for reading (counts a hit or miss): None when the key
/// is missing, WRONGTYPE when it holds another type.
pub fn read_value<'a, T: TypedValue>(keys: &'a mut KeyAccess<'_>, key: &[u8]) -> Result<Option<&'a T>, CmdError> {
    match keys.get(key) {
        None => Ok(None),
        Some(e) => T::of(e.value()).map(Some).ok_or(CmdError::from(err::WRONGTYPE)),
    }
}

/// Writes the value at `key` through `write`: None when the key is missing,
/// WRONGTYPE when it holds another type. The key counts as changed only
/// when `write` says so (`Changed::Yes`); WRONGTYPE or an error of `write`
/// changes nothing (see `KeyAccess::update`).
pub fn write_value<T: TypedValue, R>(
    keys: &mut KeyAccess<'_>,
    key: &[u8],
    write: impl FnOnce(&mut T) -> Result<Changed<R>, CmdError>,
) -> Result<Option<R>, CmdError> {
    keys.update(key, |e| write(value_mut(e)?)).transpose()
}

/// `write_value` that creates the key with `make()` when it is missing (see
/// `KeyAccess::update_or_create`).
pub fn write_value_or_create<T: TypedValue, R>(
    keys: &mut KeyAccess<'_>,
    key: &[u8],
    make: impl FnOnce() -> Value,
    write: impl FnOnce(&mut T) -> Result<Changed<R>, CmdError>,
) -> Result<R, CmdError> {
    keys.update_or_create(key, make, |e| write(value_mut(e)?))
}

/// The value inside an entry being written, or WRONGTYPE. The type is
/// checked before the value is borrowed for writing, which would unpack a
/// string (see `Entry::value_mut`).
fn value_mut<'e, T: TypedValue>(e: &'e mut EntryMut<'_>) -> Result<&'e mut T, CmdError> {
    if T::of(e.value()).is_none() {
        return Err(err::WRONGTYPE.into());
    }
    Ok(T::of_mut(e.value_mut()).expect("type checked above"))
}

/// HDEL, SREM: removes each of `members` with `remove` and replies with how
/// many were there. A missing key counts as empty; removing stops once the
/// value is empty, as Redis does (the key then goes away).
pub fn remove_members<T: TypedValue>(
    ctx: &mut Ctx<'_>,
    key: &[u8],
    members: &[&[u8]],
    out: &mut Reply,
    event: (u32, &str),
    mut remove: impl FnMut(&mut T, &[u8]) -> bool,
) -> CmdResult {
    let removed = write_value(&mut ctx.keys, key, |value: &mut T| {
        let mut removed = 0;
        for m in members {
            if remove(value, m) {
                removed += 1;
                if value.is_empty() {
                    break;
                }
            }
        }
        Ok(Changed::when(removed > 0, (removed, value.is_empty())))
    })?;
    let (removed, emptied) = removed.unwrap_or((0, false));
    if removed > 0 {
        ctx.notify(event.0, event.1, key);
        if emptied {
            ctx.notify(ev::GENERIC, "del", key);
        }
    }
    out.int(removed);
    Ok(())
}
