//! `remediation.maxUnhealthy`: how many of a cluster's nodes may be unhealthy for capstan to
//! still fence and replace them. When a switch or the management network fails, every node
//! goes NotReady at once; fencing them all would turn a network fault into an outage, so past
//! the limit nothing is fenced (Cluster API's MachineHealthCheck stops at `maxUnhealthy` for
//! the same reason).

use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A count of nodes (`2`) or a percentage of the cluster's nodes (`"40%"`, rounded down as
/// Cluster API rounds it: 40% of 5 nodes is 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MaxUnhealthy {
    /// At most this many nodes.
    Count(u32),
    /// At most this percentage (0 to 100) of the nodes.
    Percent(u8),
}

impl Default for MaxUnhealthy {
    /// 40%: two of five nodes down still looks like nodes dying, three looks like the network.
    fn default() -> Self {
        MaxUnhealthy::Percent(40)
    }
}

impl MaxUnhealthy {
    /// The most unhealthy nodes out of `nodes` that remediation still acts on.
    pub fn of(self, nodes: usize) -> usize {
        match self {
            MaxUnhealthy::Count(count) => usize::try_from(count).unwrap_or(usize::MAX),
            MaxUnhealthy::Percent(percent) => nodes.saturating_mul(usize::from(percent)) / 100,
        }
    }
}

impl fmt::Display for MaxUnhealthy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MaxUnhealthy::Count(count) => write!(f, "{count}"),
            MaxUnhealthy::Percent(percent) => write!(f, "{percent}%"),
        }
    }
}

impl FromStr for MaxUnhealthy {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let invalid = || {
            format!(
                "`{text}` is not a count or a percentage of nodes: write e.g. `2` or `40%` (at most `100%`)"
            )
        };
        match text.trim().strip_suffix('%') {
            Some(percent) => percent
                .trim()
                .parse::<u8>()
                .ok()
                .filter(|p| *p <= 100)
                .map(MaxUnhealthy::Percent)
                .ok_or_else(invalid),
            None => text
                .trim()
                .parse::<u32>()
                .map(MaxUnhealthy::Count)
                .map_err(|_| invalid()),
        }
    }
}

impl Serialize for MaxUnhealthy {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            MaxUnhealthy::Count(count) => serializer.serialize_u32(*count),
            MaxUnhealthy::Percent(_) => serializer.collect_str(self),
        }
    }
}

impl<'de> Deserialize<'de> for MaxUnhealthy {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;

        impl serde::de::Visitor<'_> for Visitor {
            type Value = MaxUnhealthy;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a count of nodes or a percentage such as `40%`")
            }

            fn visit_u64<E: serde::de::Error>(self, value: u64) -> Result<Self::Value, E> {
                u32::try_from(value)
                    .map(MaxUnhealthy::Count)
                    .map_err(|_| E::custom(format!("{value} nodes: at most {}", u32::MAX)))
            }

            fn visit_i64<E: serde::de::Error>(self, value: i64) -> Result<Self::Value, E> {
                u64::try_from(value)
                    .map_err(|_| E::custom(format!("{value}: a count of nodes is not negative")))
                    .and_then(|value| self.visit_u64(value))
            }

            fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Self::Value, E> {
                text.parse().map_err(E::custom)
            }
        }

        deserializer.deserialize_any(Visitor)
    }
}

impl JsonSchema for MaxUnhealthy {
    fn schema_name() -> Cow<'static, str> {
        Cow::Borrowed("MaxUnhealthy")
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "A count of nodes, or a percentage of the cluster's nodes such as 40% (rounded down)",
            "oneOf": [
                {"type": "integer", "minimum": 0, "maximum": u32::MAX},
                {"type": "string", "pattern": r"^\s*(100|[1-9]?[0-9])\s*%\s*$"}
            ]
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_limit_is_a_count_or_a_percentage_rounded_down() {
        assert_eq!("40%".parse(), Ok(MaxUnhealthy::Percent(40)));
        assert_eq!("2".parse(), Ok(MaxUnhealthy::Count(2)));
        assert_eq!(MaxUnhealthy::default().of(5), 2);
        assert_eq!(MaxUnhealthy::default().of(6), 2);
        assert_eq!(MaxUnhealthy::Percent(100).of(6), 6);
        assert_eq!(MaxUnhealthy::Count(3).of(1), 3);
        for bad in ["101%", "-1", "half", "40 %%"] {
            let err = bad.parse::<MaxUnhealthy>().expect_err(bad);
            assert!(err.contains("is not a count or a percentage"), "{err}");
        }
    }
}
