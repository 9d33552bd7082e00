//! Redis's glob patterns (KEYS, SCAN MATCH, PSUBSCRIBE, CONFIG GET).

/// Redis's glob-style pattern matching (`stringmatchlen`): `*`, `?`,
/// `[abc]`, `[^a]`, `[a-z]`, and `\` escapes.
pub fn glob_match(pattern: &[u8], s: &[u8], nocase: bool) -> bool {
    glob_rec(pattern, s, nocase, 0)
}

fn glob_rec(mut p: &[u8], mut s: &[u8], nocase: bool, depth: u32) -> bool {
    // Redis bounds recursion too, against patterns like "*a*a*a*...".
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
                    if glob_rec(&p[1..], &s[i..], nocase, depth + 1) {
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
                        if eq(p[0], s[0]) {
                            matched = true;
                        }
                    } else if p[0] == b']' {
                        break;
                    } else if p.len() >= 3 && p[1] == b'-' {
                        let (mut start, mut end) = (p[0], p[2]);
                        if start > end {
                            std::mem::swap(&mut start, &mut end);
                        }
                        let c = s[0];
                        let (c, start, end) = if nocase {
                            (c.to_ascii_lowercase(), start.to_ascii_lowercase(), end.to_ascii_lowercase())
                        } else {
                            (c, start, end)
                        };
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
                    // Unterminated class: Redis treats the end as the end.
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
