//! Redis's glob patterns (KEYS, SCAN MATCH, PSUBSCRIBE, CONFIG GET).
//!
//! Matching takes O(pattern × string) steps at worst: every token but `*`
//! matches exactly one byte, so after a mismatch it is enough to retry from
//! the last `*` seen, one byte further on (a longer match for an earlier `*`
//! could only start the rest later, which the later `*` already tried).
//! Patterns such as `*a*a*a*...b` therefore cannot stall a partition lock
//! (Redis's CVE-2022-36021).

/// Redis 7.0 recurses once per group of `*` and gives up (no match) when it
/// would nest deeper than this; we give the same replies.
const MAX_STAR_GROUPS: usize = 1000;

/// Redis's glob-style pattern matching (`stringmatchlen`): `*`, `?`,
/// `[abc]`, `[^a]`, `[a-z]`, and `\` escapes, with Redis 7.0's edge cases:
/// an unterminated `[` runs to the end of the pattern, a trailing `\` is a
/// literal, `[z-a]` is `[a-z]`, ranges compare bytes as signed `char`s, and
/// a `\` escape inside a class ignores `nocase`.
pub fn glob_match(pattern: &[u8], s: &[u8], nocase: bool) -> bool {
    // Redis's loop never starts on an empty string, so only the empty
    // pattern matches it (callers treat a lone `*` as "everything" first).
    if s.is_empty() {
        return pattern.is_empty();
    }
    // Reaching more than MAX_STAR_GROUPS groups needs at least two bytes each.
    if pattern.len() > 2 * MAX_STAR_GROUPS && too_deep(pattern) {
        return false;
    }
    let (mut p, mut i) = (0, 0);
    // Where the pattern resumes after the last `*`, and the byte of `s` the
    // current attempt from there started at.
    let mut retry: Option<(usize, usize)> = None;
    while i < s.len() {
        if pattern.get(p) == Some(&b'*') {
            p = skip_stars(pattern, p);
            if p == pattern.len() {
                return true;
            }
            retry = Some((p, i));
            continue;
        }
        if p < pattern.len()
            && let Some(next) = match_one(pattern, p, s[i], nocase)
        {
            p = next;
            i += 1;
            continue;
        }
        // A mismatch, or pattern left over: let the last `*` take one more byte.
        let Some((resume, start)) = retry else {
            return false;
        };
        retry = Some((resume, start + 1));
        p = resume;
        i = start + 1;
    }
    skip_stars(pattern, p) == pattern.len()
}

fn skip_stars(pattern: &[u8], mut p: usize) -> usize {
    while pattern.get(p) == Some(&b'*') {
        p += 1;
    }
    p
}

/// Whether the single-byte token at `p` (not `*`) matches `c`; if so, where
/// the pattern continues.
fn match_one(pattern: &[u8], p: usize, c: u8, nocase: bool) -> Option<usize> {
    match pattern[p] {
        b'?' => Some(p + 1),
        b'[' => {
            let (hit, next) = class(pattern, p + 1, c, nocase);
            hit.then_some(next)
        }
        b'\\' if p + 1 < pattern.len() => same(pattern[p + 1], c, nocase).then_some(p + 2),
        lit => same(lit, c, nocase).then_some(p + 1),
    }
}

fn same(a: u8, b: u8, nocase: bool) -> bool {
    a == b || (nocase && a.eq_ignore_ascii_case(&b))
}

/// A class whose body starts at `p` (after the `[`): whether `c` is in it,
/// and where the pattern continues (its end when the class is unterminated).
fn class(pattern: &[u8], mut p: usize, c: u8, nocase: bool) -> (bool, usize) {
    let negated = pattern.get(p) == Some(&b'^');
    if negated {
        p += 1;
    }
    let mut hit = false;
    // Checked in Redis's order: an escape, the closing `]`, a range, a byte.
    while let Some(&b) = pattern.get(p) {
        if b == b'\\' && p + 1 < pattern.len() {
            // Redis compares an escaped byte in a class exactly, even nocase.
            hit |= pattern[p + 1] == c;
            p += 2;
        } else if b == b']' {
            p += 1;
            break;
        } else if p + 2 < pattern.len() && pattern[p + 1] == b'-' {
            hit |= in_range(b, pattern[p + 2], c, nocase);
            p += 3;
        } else {
            hit |= same(b, c, nocase);
            p += 1;
        }
    }
    (hit != negated, p)
}

/// Redis compares range bounds as C `char`s (signed on the platforms it
/// ships for: bytes from 0x80 sort below `\0`), swaps backward bounds, then
/// lowercases all three when nocase (so `[Z-a]` matches nothing nocase).
fn in_range(a: u8, b: u8, c: u8, nocase: bool) -> bool {
    let fold = |x: u8| (if nocase { x.to_ascii_lowercase() } else { x }) as i8;
    let (lo, hi) = if (a as i8) > (b as i8) { (b, a) } else { (a, b) };
    (fold(lo)..=fold(hi)).contains(&fold(c))
}

/// Whether the pattern has a group of `*` beyond MAX_STAR_GROUPS with more
/// pattern after it: Redis never matches those (a final group would match
/// without recursing).
fn too_deep(pattern: &[u8]) -> bool {
    let (mut p, mut groups) = (0, 0);
    while p < pattern.len() {
        match pattern[p] {
            b'*' => {
                p = skip_stars(pattern, p);
                groups += 1;
                if groups > MAX_STAR_GROUPS && p < pattern.len() {
                    return true;
                }
            }
            b'[' => p = class(pattern, p + 1, 0, false).1,
            b'\\' if p + 1 < pattern.len() => p += 2,
            _ => p += 1,
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The recursive matcher this module used to have, kept as a reference:
    /// exponential on `*a*a*a...`, but a direct reading of Redis's
    /// `stringmatchlen`. Three of its differences from Redis 7.0 are fixed
    /// here (marked "Redis:"), so it is the specification the fast matcher
    /// is compared with.
    fn reference(pattern: &[u8], s: &[u8], nocase: bool) -> bool {
        // Redis: the empty string matches only the empty pattern.
        if s.is_empty() {
            return pattern.is_empty();
        }
        reference_rec(pattern, s, nocase, 0)
    }

    fn reference_rec(mut p: &[u8], mut s: &[u8], nocase: bool, depth: u32) -> bool {
        if depth > 1000 {
            return false;
        }
        let eq = |a: u8, b: u8| if nocase { a.eq_ignore_ascii_case(&b) } else { a == b };
        while !p.is_empty() {
            match p[0] {
                b'*' => {
                    while p.len() > 1 && p[1] == b'*' {
                        p = &p[1..];
                    }
                    if p.len() == 1 {
                        return true;
                    }
                    for i in 0..=s.len() {
                        if reference_rec(&p[1..], &s[i..], nocase, depth + 1) {
                            return true;
                        }
                    }
                    return false;
                }
                b'?' => {
                    if s.is_empty() {
                        return false;
                    }
                    s = &s[1..];
                }
                b'[' => {
                    if s.is_empty() {
                        return false;
                    }
                    p = &p[1..];
                    let not = !p.is_empty() && p[0] == b'^';
                    if not {
                        p = &p[1..];
                    }
                    let mut matched = false;
                    loop {
                        if p.is_empty() {
                            break;
                        }
                        if p[0] == b'\\' && p.len() >= 2 {
                            p = &p[1..];
                            // Redis: exact comparison, even nocase.
                            if p[0] == s[0] {
                                matched = true;
                            }
                        } else if p[0] == b']' {
                            break;
                        } else if p.len() >= 3 && p[1] == b'-' {
                            // Redis: signed chars.
                            let (mut start, mut end) = (p[0] as i8, p[2] as i8);
                            if start > end {
                                std::mem::swap(&mut start, &mut end);
                            }
                            let c = s[0] as i8;
                            let low = |x: i8| (x as u8).to_ascii_lowercase() as i8;
                            let (c, start, end) = if nocase { (low(c), low(start), low(end)) } else { (c, start, end) };
                            if c >= start && c <= end {
                                matched = true;
                            }
                            p = &p[2..];
                        } else if eq(p[0], s[0]) {
                            matched = true;
                        }
                        p = &p[1..];
                    }
                    if not {
                        matched = !matched;
                    }
                    if !matched {
                        return false;
                    }
                    s = &s[1..];
                    if p.is_empty() {
                        return s.is_empty();
                    }
                }
                b'\\' if p.len() >= 2 => {
                    p = &p[1..];
                    if s.is_empty() || !eq(p[0], s[0]) {
                        return false;
                    }
                    s = &s[1..];
                }
                c => {
                    if s.is_empty() || !eq(c, s[0]) {
                        return false;
                    }
                    s = &s[1..];
                }
            }
            p = &p[1..];
            if s.is_empty() {
                while !p.is_empty() && p[0] == b'*' {
                    p = &p[1..];
                }
                break;
            }
        }
        p.is_empty() && s.is_empty()
    }

    #[test]
    fn globs() {
        assert!(glob_match(b"*", b"anything", false));
        assert!(glob_match(b"h?llo", b"hello", false));
        assert!(glob_match(b"h[ae]llo", b"hallo", false));
        assert!(!glob_match(b"h[^e]llo", b"hello", false));
        assert!(glob_match(b"h[a-b]llo", b"hbllo", false));
        assert!(glob_match(b"user:*:name", b"user:42:name", false));
        assert!(!glob_match(b"user:*:name", b"user:42:mail", false));
        assert!(glob_match(b"a\\*b", b"a*b", false));
        assert!(glob_match(b"HELLO", b"hello", true));
        assert!(!glob_match(b"a*a*a*a*a*a*a*a*b", &[b'a'; 40], false));
    }

    /// Each case was checked against redis-server 7.0.15 (KEYS, or CONFIG
    /// GET for nocase).
    #[test]
    fn redis_edge_cases() {
        let cases: &[(&[u8], &[u8], bool, bool)] = &[
            (b"*", b"", false, false),
            (b"**", b"", false, false),
            (b"", b"", false, true),
            (b"[", b"a", false, false),
            (b"[^", b"a", false, true),
            (b"[^]", b"a", false, true),
            (b"[]", b"a", false, false),
            (b"[]]", b"]", false, false),
            (b"\\", b"\\", false, true),
            (b"a\\", b"a", false, false),
            (b"[a", b"a", false, true),
            (b"[a", b"ab", false, false),
            (b"[z-a]", b"b", false, true),
            (b"[A-a]", b"\\", false, true),
            (b"[A-a]", b"b", false, false),
            (b"[\\A]", b"A", false, true),
            (b"[\\M]axmemory", b"maxmemory", true, false),
            (b"[M]axmemory", b"maxmemory", true, true),
            (b"[L-N]axmemory", b"maxmemory", true, true),
            (b"[Z-a]axmemory", b"maxmemory", true, false),
            (b"[^a", b"b", false, true),
            (b"[a-\xff]", b"A", false, true),
            (b"[a-\xff]", b"\xff", false, true),
            (b"[a-\xff]", b"b", false, false),
            (b"[a-\xff]", b"\x80", false, false),
            (b"[\x01-\x80]", b"\xff", false, true),
            (b"[\x01-\x80]", b"a", false, false),
            (b"[\x80-\xff]", b"\x80", false, true),
            (b"a*", b"a", false, true),
            (b"*[", b"ab", false, false),
        ];
        for &(p, s, nocase, want) in cases {
            let show = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
            assert_eq!(glob_match(p, s, nocase), want, "{:?} vs {:?} nocase={nocase}", show(p), show(s));
            assert_eq!(reference(p, s, nocase), want, "reference: {:?} vs {:?}", show(p), show(s));
        }
    }

    /// Redis 7.0 gives up beyond 1000 nested groups of `*` unless the
    /// group is the last thing in the pattern (checked on redis-server).
    #[test]
    fn star_groups_beyond_redis_nesting_limit_never_match() {
        let s = vec![b'a'; 1100];
        let stars = |n: usize, unit: &[u8], tail: &[u8]| [unit.repeat(n), tail.to_vec()].concat();
        assert!(glob_match(&stars(1000, b"*a", b""), &s, false));
        assert!(!glob_match(&stars(1001, b"*a", b""), &s, false));
        assert!(glob_match(&stars(1000, b"*a", b"*"), &s, false));
        assert!(glob_match(&stars(1001, b"a*", b""), &s, false));
        assert!(!glob_match(&stars(1001, b"a*", b"a"), &s, false));
        assert!(glob_match(&stars(1000, b"a*", b"a"), &s, false));
        // Stars inside a class or escaped do not count.
        assert!(glob_match(&stars(1001, b"[*]a", b"*a"), &stars(1001, b"*a", b"xa"), false));
        assert!(glob_match(&stars(1001, b"\\*a", b"*a"), &stars(1001, b"*a", b"xa"), false));
    }

    /// Patterns that took the recursive matcher seconds take microseconds.
    #[test]
    fn hostile_patterns_run_in_linear_passes() {
        let started = std::time::Instant::now();
        let hostile = [b"*a".repeat(30), b"b".to_vec()].concat();
        for len in [28, 40, 100, 1000] {
            assert!(!glob_match(&hostile, &vec![b'a'; len], false));
            // Thirty `a`s are needed before the `b`.
            assert_eq!(glob_match(&hostile, &[vec![b'a'; len], b"b".to_vec()].concat(), false), len >= 30);
        }
        let classes = [b"*[a-z]".repeat(30), b"?[^a]".to_vec()].concat();
        assert!(!glob_match(&classes, &vec![b'a'; 1000], false));
        // Generous for a debug build on a busy machine; the old matcher needed
        // seconds for the 28-byte string alone.
        assert!(started.elapsed() < std::time::Duration::from_millis(500), "{:?}", started.elapsed());
    }

    /// SplitMix64: a seeded, dependency-free source of test cases.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        }

        fn bytes(&mut self, alphabet: &[u8], max_len: u64) -> Vec<u8> {
            let len = self.next() % (max_len + 1);
            (0..len).map(|_| alphabet[(self.next() % alphabet.len() as u64) as usize]).collect()
        }
    }

    #[test]
    fn agrees_with_the_recursive_reference_on_random_cases() {
        const PATTERN_BYTES: &[u8] = b"ab*?[]^-\\A\xff";
        const STRING_BYTES: &[u8] = b"abAB]-^\\*?\xff\x80";
        let mut rng = Rng(0x5eed_0036_0210_2022);
        let mut matched = 0;
        for n in 0..300_000 {
            let p = rng.bytes(PATTERN_BYTES, 10);
            let s = rng.bytes(STRING_BYTES, 8);
            let nocase = n % 4 == 0;
            let want = reference(&p, &s, nocase);
            matched += usize::from(want);
            assert_eq!(
                glob_match(&p, &s, nocase),
                want,
                "case {n}: pattern {:?} string {:?} nocase={nocase}",
                String::from_utf8_lossy(&p),
                String::from_utf8_lossy(&s)
            );
        }
        // The alphabets must produce both answers often, or the test is idle.
        assert!(matched > 5_000 && matched < 295_000, "{matched} matches");
    }
}
