//! What a node holds and may hold, from its `INFO` (asked on the admin port), for the capacity
//! check before a migration: the data in RAM (`used_memory_dataset`) and on the disk tier
//! (`tier_disk_bytes`), against `maxmemory` + `tier_max_disk_bytes`.

use super::client::{self, AdminEndpoint, AdminError, Reply};

/// A node's data bytes and budget (0: no limit).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    pub used: u64,
    pub budget: u64,
}

/// `INFO memory` and `INFO tier` of the node at `endpoint`.
pub async fn usage(endpoint: &AdminEndpoint) -> Result<Usage, AdminError> {
    let mut text = String::new();
    for section in ["memory", "tier"] {
        match client::call(endpoint, &["INFO".to_owned(), section.to_owned()]).await? {
            Reply::Bulk(b) => text.push_str(&String::from_utf8_lossy(&b)),
            other => {
                return Err(AdminError::Protocol {
                    address: endpoint.address.clone(),
                    what: format!("{other:?} to INFO"),
                });
            }
        }
    }
    Ok(parse(&text))
}

/// The fields of INFO's `name:value` lines that matter here.
pub fn parse(info: &str) -> Usage {
    let field = |name: &str| {
        info.lines().find_map(|l| l.trim_end().strip_prefix(name)?.strip_prefix(':')?.parse::<u64>().ok()).unwrap_or(0)
    };
    let ram_budget = field("maxmemory");
    // No RAM limit: no budget at all (the disk tier alone does not bound the node).
    let budget = if ram_budget == 0 { 0 } else { ram_budget + field("tier_max_disk_bytes") };
    Usage { used: field("used_memory_dataset") + field("tier_disk_bytes"), budget }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_fields_add_up() {
        let info = "# Memory\r\nused_memory:900\r\nused_memory_dataset:600\r\nmaxmemory:1000\r\n# Tier\r\n\
                    tier_disk_bytes:4000\r\ntier_max_disk_bytes:10000\r\n";
        assert_eq!(parse(info), Usage { used: 4600, budget: 11000 });
        assert_eq!(parse("used_memory_dataset:5\r\nmaxmemory:0\r\n").budget, 0, "no limit");
    }
}
