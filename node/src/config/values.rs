//! Value types of configuration parameters: how each is parsed from a
//! command line, environment variable, config file or CONFIG SET, and how it
//! is written back (CONFIG GET, CONFIG REWRITE).

/// How writes reach disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Durability {
    /// A pure cache: nothing is written.
    None,
    WriteBack,
    Periodic,
    Sync,
}

impl Durability {
    pub const ALL: [Durability; 4] = [Durability::None, Durability::WriteBack, Durability::Periodic, Durability::Sync];

    pub const fn name(self) -> &'static str {
        match self {
            Durability::None => "none",
            Durability::WriteBack => "write-back",
            Durability::Periodic => "periodic",
            Durability::Sync => "sync",
        }
    }

    /// A mode by name, in any case.
    pub fn parse(s: &str) -> Option<Durability> {
        Self::ALL.into_iter().find(|d| d.name().eq_ignore_ascii_case(s))
    }
}

/// Who may run a protected command (Redis's `enable-debug-command`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protected {
    No,
    Yes,
    /// Clients on a Unix socket or from 127.0.0.1 / ::1.
    Local,
}

impl Protected {
    pub const ALL: [Protected; 3] = [Protected::No, Protected::Yes, Protected::Local];

    pub const fn name(self) -> &'static str {
        match self {
            Protected::No => "no",
            Protected::Yes => "yes",
            Protected::Local => "local",
        }
    }

    /// A setting by name, in any case.
    pub fn parse(s: &[u8]) -> Option<Protected> {
        Self::ALL.into_iter().find(|p| p.name().as_bytes().eq_ignore_ascii_case(s))
    }
}

/// What the node does when memory reaches `maxmemory`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum EvictionPolicy {
    NoEviction,
    AllKeysLru,
    AllKeysLfu,
    AllKeysRandom,
    VolatileLru,
    VolatileLfu,
    VolatileRandom,
    VolatileTtl,
    Sieve,
}

impl EvictionPolicy {
    /// Every policy; a policy's index here is its `repr(u8)` value.
    pub const ALL: [EvictionPolicy; 9] = [
        EvictionPolicy::NoEviction,
        EvictionPolicy::AllKeysLru,
        EvictionPolicy::AllKeysLfu,
        EvictionPolicy::AllKeysRandom,
        EvictionPolicy::VolatileLru,
        EvictionPolicy::VolatileLfu,
        EvictionPolicy::VolatileRandom,
        EvictionPolicy::VolatileTtl,
        EvictionPolicy::Sieve,
    ];

    /// Redis's order (its CONFIG SET error lists them so), then Strata's own.
    pub const REDIS_ORDER: [EvictionPolicy; 9] = [
        EvictionPolicy::VolatileLru,
        EvictionPolicy::VolatileLfu,
        EvictionPolicy::VolatileRandom,
        EvictionPolicy::VolatileTtl,
        EvictionPolicy::AllKeysLru,
        EvictionPolicy::AllKeysLfu,
        EvictionPolicy::AllKeysRandom,
        EvictionPolicy::NoEviction,
        EvictionPolicy::Sieve,
    ];

    pub const fn name(self) -> &'static str {
        match self {
            EvictionPolicy::NoEviction => "noeviction",
            EvictionPolicy::AllKeysLru => "allkeys-lru",
            EvictionPolicy::AllKeysLfu => "allkeys-lfu",
            EvictionPolicy::AllKeysRandom => "allkeys-random",
            EvictionPolicy::VolatileLru => "volatile-lru",
            EvictionPolicy::VolatileLfu => "volatile-lfu",
            EvictionPolicy::VolatileRandom => "volatile-random",
            EvictionPolicy::VolatileTtl => "volatile-ttl",
            EvictionPolicy::Sieve => "sieve",
        }
    }

    /// A policy by name, in any case.
    pub fn parse(s: &str) -> Option<EvictionPolicy> {
        Self::ALL.into_iter().find(|p| p.name().eq_ignore_ascii_case(s))
    }

    /// Picks its victims at random: any one random candidate is as good as
    /// the best of several, so one draw does.
    pub fn is_random(self) -> bool {
        matches!(self, EvictionPolicy::AllKeysRandom | EvictionPolicy::VolatileRandom)
    }

    /// Evicts only keys with a TTL.
    pub fn is_volatile(self) -> bool {
        matches!(
            self,
            EvictionPolicy::VolatileLru
                | EvictionPolicy::VolatileLfu
                | EvictionPolicy::VolatileRandom
                | EvictionPolicy::VolatileTtl
        )
    }

    /// Evicts at all (not noeviction).
    pub fn evicts(self) -> bool {
        self != EvictionPolicy::NoEviction
    }

    /// The policy stored as `repr(u8)`; out-of-range values mean noeviction.
    pub fn from_index(i: u8) -> EvictionPolicy {
        Self::ALL.get(i as usize).copied().unwrap_or(EvictionPolicy::NoEviction)
    }
}

/// The names of an enum's `ALL` values, in that order, as a constant.
macro_rules! names_of_all {
    ($ty:ty) => {{
        let mut names = [""; <$ty>::ALL.len()];
        let mut i = 0;
        while i < names.len() {
            names[i] = <$ty>::ALL[i].name();
            i += 1;
        }
        names
    }};
}

/// Names of [`EvictionPolicy::ALL`], in that order.
pub const POLICIES: &[&str] = &names_of_all!(EvictionPolicy);

/// Names of [`Durability::ALL`], in that order.
pub const DURABILITY_MODES: &[&str] = &names_of_all!(Durability);

pub const MB: u64 = 1024 * 1024;
const GB: u64 = 1024 * MB;

/// Parses Redis memory units: `1gb`, `512mb`, `100k`, `1024` (bytes).
/// `k`/`m`/`g` are powers of 1000, `kb`/`mb`/`gb` powers of 1024 (as Redis).
pub fn parse_memory(s: &str) -> Option<u64> {
    let s = s.trim().to_ascii_lowercase();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: u64 = num.parse().ok()?;
    let mul: u64 = match unit {
        "" | "b" => 1,
        "k" => 1000,
        "kb" => 1024,
        "m" => 1000 * 1000,
        "mb" => MB,
        "g" => 1000 * 1000 * 1000,
        "gb" => GB,
        _ => return None,
    };
    n.checked_mul(mul)
}

/// Formats bytes as Redis's CONFIG REWRITE does (gb/mb/kb when exact).
pub fn format_memory(n: u64) -> String {
    match n {
        0 => "0".into(),
        n if n % GB == 0 => format!("{}gb", n / GB),
        n if n % MB == 0 => format!("{}mb", n / MB),
        n if n % 1024 == 0 => format!("{}kb", n / 1024),
        n => n.to_string(),
    }
}

/// Parses an interval such as `10ms`, `500us` or `1s` into microseconds.
pub fn parse_interval_us(s: &str) -> Option<u64> {
    let split = s.find(|c: char| !c.is_ascii_digit())?;
    let (num, unit) = s.split_at(split);
    let n: u64 = num.parse().ok().filter(|n| *n > 0)?;
    let mul = match unit {
        "us" => 1,
        "ms" => 1_000,
        "s" => 1_000_000,
        _ => return None,
    };
    n.checked_mul(mul)
}

/// `10000` µs → `10ms`: the largest unit that divides the interval exactly.
pub fn format_interval_us(us: u64) -> String {
    if us % 1_000_000 == 0 {
        format!("{}s", us / 1_000_000)
    } else if us % 1_000 == 0 {
        format!("{}ms", us / 1_000)
    } else {
        format!("{us}us")
    }
}

/// A path made absolute where it exists (CONFIG GET dir, INFO config_file).
pub fn absolute_path(p: &std::path::Path) -> String {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf()).display().to_string()
}

pub fn yes_no(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}

/// Parses `0,2-3` into CPU ids.
pub fn parse_cpu_list(s: &str) -> Result<Vec<usize>, String> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        if let Some((a, b)) = part.split_once('-') {
            let a: usize = a.parse().map_err(|_| format!("bad CPU range '{part}'"))?;
            let b: usize = b.parse().map_err(|_| format!("bad CPU range '{part}'"))?;
            if a > b {
                return Err(format!("bad CPU range '{part}'"));
            }
            out.extend(a..=b);
        } else {
            out.push(part.parse().map_err(|_| format!("bad CPU id '{part}'"))?);
        }
    }
    if out.is_empty() {
        return Err("empty CPU list".into());
    }
    Ok(out)
}

/// `[0, 2, 3]` → `0,2,3`, the form `parse_cpu_list` reads back.
pub fn format_cpu_list(cpus: &[usize]) -> String {
    cpus.iter().map(usize::to_string).collect::<Vec<_>>().join(",")
}

/// Where a value comes from: start-up accepts a few values CONFIG SET
/// refuses (tracing's level names and filters for `loglevel`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    Startup,
    ConfigSet,
}

/// Log levels CONFIG SET accepts (Redis's names).
pub const REDIS_LOG_LEVELS: &[&str] = &["debug", "verbose", "notice", "warning"];

/// The value type of a parameter: what its values look like and, for
/// CONFIG SET, which are in range. Errors read as Redis's CONFIG SET ones.
#[derive(Clone, Copy, Debug)]
pub enum Kind {
    /// Bytes, with Redis's units (`512mb`).
    Memory {
        min: u64,
        max: u64,
    },
    Int {
        min: i64,
        max: i64,
    },
    YesNo,
    Policy,
    Durability,
    LogLevel,
    /// Microseconds, written with a unit (`10ms`).
    Interval,
    /// `off`, `auto` or a CPU list such as `0,2-3`.
    CpuAffinity,
    /// Unix permissions in octal.
    Octal,
    Text,
    /// A Redis parameter with a parser of its own.
    Custom(fn(&[u8]) -> Result<Parsed, String>),
}

/// A parsed parameter value.
#[derive(Clone, Debug, PartialEq)]
pub enum Parsed {
    Int(i64),
    Bytes(u64),
    Bool(bool),
    Policy(EvictionPolicy),
    Durability(Durability),
    Micros(u64),
    /// None: not pinned; `auto` is resolved to the allowed CPUs.
    Cpus(Option<Vec<usize>>),
    /// None when empty.
    Perm(Option<u32>),
    Text(Vec<u8>),
    Protected(Protected),
    HugePages(crate::sys::hugepages::HugePages),
    /// Hard output buffer limits of normal and pub/sub clients, where given.
    ObufLimits {
        normal: Option<usize>,
        pubsub: Option<usize>,
    },
    /// A value accepted that changes nothing.
    Nothing,
}

/// "argument(s) must be one of the following: a, b", as Redis words it.
fn one_of<'a>(options: impl IntoIterator<Item = &'a str>) -> String {
    let names: Vec<&str> = options.into_iter().collect();
    format!("argument(s) must be one of the following: {}", names.join(", "))
}

fn in_range<T: PartialOrd + std::fmt::Display>(n: T, min: T, max: T) -> Result<T, String> {
    if n < min || n > max {
        return Err(format!("argument must be between {min} and {max} inclusive"));
    }
    Ok(n)
}

impl Kind {
    /// Parses a value of this type.
    pub fn parse(self, v: &[u8], origin: Origin) -> Result<Parsed, String> {
        match self {
            Kind::Text => return Ok(Parsed::Text(v.to_vec())),
            Kind::Custom(parse) => return parse(v),
            _ => {}
        }
        let s = std::str::from_utf8(v).map_err(|_| "argument must be a valid string".to_string())?;
        Ok(match self {
            Kind::Memory { min, max } => {
                Parsed::Bytes(in_range(parse_memory(s).ok_or("argument must be a memory value")?, min, max)?)
            }
            Kind::Int { min, max } => Parsed::Int(in_range(
                crate::base::parse_i64(v).ok_or("argument couldn't be parsed into an integer")?,
                min,
                max,
            )?),
            Kind::YesNo => match s.to_ascii_lowercase().as_str() {
                "yes" => Parsed::Bool(true),
                "no" => Parsed::Bool(false),
                _ => return Err(one_of(["yes", "no"])),
            },
            Kind::Policy => Parsed::Policy(
                EvictionPolicy::parse(s).ok_or_else(|| one_of(EvictionPolicy::REDIS_ORDER.map(|p| p.name())))?,
            ),
            Kind::Durability => {
                Parsed::Durability(Durability::parse(s).ok_or_else(|| one_of(Durability::ALL.map(|d| d.name())))?)
            }
            // Start-up also takes tracing's names and filters (`info`, `strata_node=debug`).
            Kind::LogLevel if origin == Origin::Startup => Parsed::Text(v.to_vec()),
            Kind::LogLevel => match REDIS_LOG_LEVELS.iter().find(|l| l.eq_ignore_ascii_case(s)) {
                Some(l) => Parsed::Text(l.as_bytes().to_vec()),
                None => return Err(one_of(REDIS_LOG_LEVELS.iter().copied())),
            },
            Kind::Interval => Parsed::Micros(
                parse_interval_us(s).ok_or("argument must be a whole number with unit us, ms or s, e.g. 10ms")?,
            ),
            Kind::CpuAffinity => Parsed::Cpus(match s {
                "" | "off" | "none" => None,
                "auto" => Some(crate::sys::cpu::allowed_cpus()),
                list => Some(parse_cpu_list(list)?),
            }),
            Kind::Octal => Parsed::Perm(match s {
                "" => None,
                p => Some(u32::from_str_radix(p, 8).map_err(|_| "argument must be an octal number")?),
            }),
            Kind::Text | Kind::Custom(_) => unreachable!("handled above"),
        })
    }

    /// How a value of this type is written in a config file.
    pub fn file_form(self, value: String) -> String {
        match self {
            Kind::Memory { .. } => value.parse::<u64>().map(format_memory).unwrap_or(value),
            _ => value,
        }
    }

    /// The placeholder `--help` shows for a value.
    pub fn value_name(self) -> &'static str {
        match self {
            Kind::Memory { .. } => "BYTES",
            Kind::Int { .. } => "N",
            Kind::YesNo => "yes|no",
            Kind::Policy => "POLICY",
            Kind::Durability => "MODE",
            Kind::LogLevel => "LEVEL",
            Kind::Interval => "INTERVAL",
            Kind::CpuAffinity => "CPUS",
            Kind::Octal => "OCTAL",
            Kind::Text | Kind::Custom(_) => "VALUE",
        }
    }
}

impl Parsed {
    pub fn int(&self) -> i64 {
        match self {
            Parsed::Int(n) => *n,
            other => unreachable!("not an integer: {other:?}"),
        }
    }

    pub fn bytes(&self) -> u64 {
        match self {
            Parsed::Bytes(n) => *n,
            other => unreachable!("not a memory value: {other:?}"),
        }
    }

    pub fn flag(&self) -> bool {
        match self {
            Parsed::Bool(b) => *b,
            other => unreachable!("not yes/no: {other:?}"),
        }
    }

    /// Text as a string (lossy: start-up values are UTF-8 already).
    pub fn text(&self) -> String {
        match self {
            Parsed::Text(t) => String::from_utf8_lossy(t).into_owned(),
            other => unreachable!("not text: {other:?}"),
        }
    }
}

impl std::fmt::Display for EvictionPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_units_like_redis() {
        assert_eq!(parse_memory("1gb"), Some(1 << 30));
        assert_eq!(parse_memory("1g"), Some(1_000_000_000));
        assert_eq!(parse_memory("100"), Some(100));
        assert_eq!(parse_memory("5MB"), Some(5 << 20));
        assert_eq!(parse_memory("x"), None);
        assert_eq!(parse_memory("5tb"), None);
    }

    #[test]
    fn memory_units_for_rewrite() {
        assert_eq!(format_memory(0), "0");
        assert_eq!(format_memory(100 * MB), "100mb");
        assert_eq!(format_memory(2 << 30), "2gb");
        assert_eq!(format_memory(3072), "3kb");
        assert_eq!(format_memory(1000), "1000");
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0,2-3").unwrap(), vec![0, 2, 3]);
        assert!(parse_cpu_list("3-1").is_err());
    }

    #[test]
    fn enums_parse_their_names_in_any_case() {
        for p in EvictionPolicy::ALL {
            assert_eq!(EvictionPolicy::parse(&p.name().to_ascii_uppercase()), Some(p));
            assert_eq!(POLICIES[p as usize], p.name());
        }
        for d in Durability::ALL {
            assert_eq!(Durability::parse(d.name()), Some(d));
            assert_eq!(DURABILITY_MODES[d as usize], d.name());
        }
        assert_eq!(EvictionPolicy::parse("bogus"), None);
    }
}
