//! Differential tests (strata vs redis) for SORT and SORT_RO on lists,
//! sets and sorted sets: numeric and ALPHA order, ASC/DESC, LIMIT, BY
//! patterns (`nosort`, keys, `->` hash fields), GET (`#`, keys, hash
//! fields), STORE, errors, MULTI/EXEC and COMMAND GETKEYS, in RESP2 and
//! RESP3.

mod support;

use support::*;

fn setup(d: &mut Diff) {
    d.exact(&["RPUSH", "n", "3", "1", "2", "10", "-5", "1.5", "1e3", "2"]);
    d.exact(&["RPUSH", "words", "pear", "apple", "Banana", "fig", "apple", "10", "9"]);
    d.exact(&["SADD", "s", "5", "3", "9", "1", "12"]);
    d.exact(&["ZADD", "z", "1", "c", "2", "b", "3", "a", "4", "d"]);
    d.exact(&["MSET", "w_3", "30", "w_1", "10", "w_2", "20", "w_10", "5", "w_-5", "-50", "w_c", "1", "w_b", "3"]);
    d.exact(&["MSET", "o_3", "x3", "o_1", "x1", "o_a", "oa", "o_b", "ob"]);
    d.exact(&["HSET", "h_3", "f", "c", "g", "3"]);
    d.exact(&["HSET", "h_1", "f", "a", "g", "1"]);
    d.exact(&["HSET", "h_2", "f", "b", "g", "2"]);
    d.exact(&["HSET", "h_a", "f", "zz"]);
}

#[test]
fn sort_orders_limits_and_patterns() {
    for resp3 in [false, true] {
        let mut d = if resp3 { Diff::new_resp3() } else { Diff::new() };
        // Leading spaces, hex and infinities read as C's strtod reads them
        // (first: Redis does not clear errno, so an earlier ERANGE sticks).
        d.exact(&["RPUSH", "odd2", " 4", "0x10", "inf", "-inf"]);
        d.exact(&["SORT", "odd2"]);
        setup(&mut d);
        let cases: &[&[&str]] = &[
            &["SORT", "n"],
            &["SORT", "n", "DESC"],
            &["SORT", "n", "ASC", "DESC", "ASC"],
            &["SORT", "n", "ALPHA"],
            &["SORT", "words", "ALPHA"],
            &["SORT", "words", "ALPHA", "DESC"],
            &["SORT", "n", "LIMIT", "0", "3"],
            &["SORT", "n", "LIMIT", "2", "3", "DESC"],
            &["SORT", "n", "LIMIT", "-5", "2"],
            &["SORT", "n", "LIMIT", "2", "-1"],
            &["SORT", "n", "LIMIT", "100", "5"],
            &["SORT", "n", "LIMIT", "1", "9223372036854775807"],
            &["SORT", "n", "LIMIT", "9223372036854775807", "1"],
            &["SORT", "n", "LIMIT", "0", "0"],
            &["SORT", "n", "BY", "nosort"],
            &["SORT", "n", "BY", "nosort", "DESC"],
            &["SORT", "n", "BY", "nosort", "LIMIT", "2", "3"],
            &["SORT", "n", "BY", "nosort", "DESC", "LIMIT", "1", "4"],
            &["SORT", "n", "BY", "w_*"],
            &["SORT", "n", "BY", "w_*", "DESC"],
            &["SORT", "n", "BY", "w_*", "LIMIT", "1", "2"],
            &["SORT", "n", "BY", "w_*", "ALPHA"],
            &["SORT", "n", "BY", "h_*->g"],
            &["SORT", "n", "BY", "h_*->f", "ALPHA"],
            &["SORT", "n", "BY", "h_*->f", "ALPHA", "DESC"],
            &["SORT", "n", "BY", "h_*->"],
            &["SORT", "n", "GET", "#"],
            &["SORT", "n", "GET", "o_*"],
            &["SORT", "n", "GET", "#", "GET", "o_*", "GET", "h_*->f", "GET", "nostar", "GET", "w_*->f"],
            &["SORT", "n", "BY", "nosort", "GET", "o_*", "LIMIT", "0", "2"],
            &["SORT", "s"],
            &["SORT", "s", "DESC", "LIMIT", "1", "2"],
            &["SORT", "s", "ALPHA"],
            &["SORT", "s", "BY", "w_*", "GET", "#", "GET", "o_*"],
            &["SORT", "z"],
            &["SORT", "z", "ALPHA"],
            &["SORT", "z", "ALPHA", "DESC"],
            &["SORT", "z", "BY", "nosort"],
            &["SORT", "z", "BY", "nosort", "DESC"],
            &["SORT", "z", "BY", "nosort", "LIMIT", "1", "2"],
            &["SORT", "z", "BY", "nosort", "DESC", "LIMIT", "1", "2"],
            &["SORT", "z", "BY", "o_*", "ALPHA", "GET", "o_*"],
            &["SORT", "nosuch"],
            &["SORT", "nosuch", "GET", "#"],
            &["SORT_RO", "n", "DESC", "LIMIT", "0", "4"],
            &["SORT_RO", "words", "BY", "nosort"],
            &["SORT_RO", "n", "BY", "w_*", "GET", "o_*"],
        ];
        for c in cases {
            d.exact(c);
        }
        // A set's own order is arbitrary without sorting.
        d.unordered(&["SORT", "s", "BY", "nosort"]);
        d.finish();
    }
}

#[test]
fn sort_errors() {
    let mut d = Diff::new();
    setup(&mut d);
    d.exact(&["SET", "str", "x"]);
    d.exact(&["RPUSH", "bad", "1", "x", "2"]);
    d.exact(&["RPUSH", "emptyish", "", "1", "-1"]);
    d.exact(&["SET", "w_x", "notanumber"]);
    let cases: &[&[&str]] = &[
        &["SORT", "str"],
        &["HSET", "hh", "a", "b"],
        &["SORT", "hh"],
        &["SORT", "bad"],
        &["SORT", "bad", "ALPHA"],
        &["SORT", "emptyish"],
        &["SORT", "n", "BY", "w_x"],
        &["RPUSH", "xs", "x"],
        &["SORT", "xs", "BY", "w_*"],
        &["SORT", "n", "LIMIT", "a", "1"],
        &["SORT", "n", "LIMIT", "1"],
        &["SORT", "n", "LIMIT", "1", "1.5"],
        &["SORT", "n", "BOGUS"],
        &["SORT", "n", "GET"],
        &["SORT", "n", "BY"],
        &["SORT", "n", "STORE"],
        &["SORT", "str", "BOGUS"],
        &["SORT", "str", "LIMIT", "x", "1"],
        &["SORT_RO", "n", "STORE", "dst"],
        &["SORT"],
        &["SORT_RO"],
        // Scores from numbers C's strtod reads with leftovers or overflow.
        &["RPUSH", "odd", "1e400", "3"],
        &["SORT", "odd"],
    ];
    for c in cases {
        d.exact(c);
    }
    d.finish();
}

#[test]
fn sort_store() {
    let mut d = Diff::new();
    setup(&mut d);
    let cases: &[&[&str]] = &[
        &["SORT", "n", "STORE", "dst"],
        &["LRANGE", "dst", "0", "-1"],
        &["TYPE", "dst"],
        &["SORT", "n", "DESC", "LIMIT", "1", "3", "STORE", "dst"],
        &["LRANGE", "dst", "0", "-1"],
        &["SORT", "n", "GET", "o_*", "GET", "#", "STORE", "dst"],
        &["LRANGE", "dst", "0", "-1"],
        &["SORT", "n", "BY", "w_*", "STORE", "dst2", "STORE", "dst3"],
        &["EXISTS", "dst2"],
        &["LRANGE", "dst3", "0", "-1"],
        // A set without a sort order is stored ALPHA-sorted.
        &["SORT", "s", "BY", "nosort", "STORE", "sdst"],
        &["LRANGE", "sdst", "0", "-1"],
        &["SORT", "s", "BY", "nosort", "DESC", "STORE", "sdst"],
        &["LRANGE", "sdst", "0", "-1"],
        &["SORT", "z", "BY", "nosort", "DESC", "STORE", "zdst"],
        &["LRANGE", "zdst", "0", "-1"],
        &["SORT", "words", "ALPHA", "STORE", "wdst"],
        &["LRANGE", "wdst", "0", "-1"],
        // An empty result deletes the destination.
        &["SORT", "nosuch", "STORE", "dst"],
        &["EXISTS", "dst"],
        &["SORT", "n", "LIMIT", "100", "1", "STORE", "zdst"],
        &["EXISTS", "zdst"],
        &["SET", "strdst", "x"],
        &["SORT", "n", "STORE", "strdst"],
        &["TYPE", "strdst"],
        &["SORT", "n", "STORE", "n"],
        &["LRANGE", "n", "0", "-1"],
        &["COMMAND", "GETKEYS", "SORT", "a", "LIMIT", "0", "1", "STORE", "b", "GET", "c", "STORE", "d"],
        &["COMMAND", "GETKEYS", "SORT", "a", "GET", "store", "BY", "store"],
        &["COMMAND", "GETKEYS", "SORT", "a", "STORE"],
        &["COMMAND", "GETKEYS", "SORT_RO", "a", "BY", "w_*"],
    ];
    for c in cases {
        d.exact(c);
    }
    d.finish();
}

/// Inside MULTI/EXEC, BY and GET patterns still see every key.
#[test]
fn sort_with_patterns_in_exec() {
    let mut d = Diff::new();
    setup(&mut d);
    for c in [
        &["MULTI"][..],
        &["SORT", "n", "BY", "w_*", "GET", "o_*", "GET", "h_*->f"],
        &["SET", "w_1", "1000"],
        &["SORT", "n", "BY", "w_*", "STORE", "out"],
        &["LRANGE", "out", "0", "-1"],
        &["EXEC"],
    ] {
        d.exact(c);
    }
    d.finish();
}
