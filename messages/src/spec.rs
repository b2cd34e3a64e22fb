//! The hard fork whose rules the chain follows.

use serde::{Deserialize, Serialize};

/// The EVM rule set: the same value configures admission, execution and the
/// store's chain identity, so it is defined once, here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Spec {
    /// Cancun (Dencun): EIP-1153 transient storage, EIP-6780 SELFDESTRUCT;
    /// no EIP-7623 calldata floor, no EIP-7702.
    Cancun,
    /// Prague (Pectra): adds EIP-7702 set-code transactions and the
    /// EIP-7623 calldata floor.
    #[default]
    Prague,
}

impl Spec {
    /// Its lowercase name, as in the config file and the store's identity.
    pub fn name(self) -> &'static str {
        match self {
            Spec::Cancun => "cancun",
            Spec::Prague => "prague",
        }
    }

    /// The fork named `name` (as [`Spec::name`] spells it).
    pub fn from_name(name: &str) -> Option<Spec> {
        [Spec::Cancun, Spec::Prague].into_iter().find(|s| s.name() == name)
    }
}

#[cfg(test)]
mod tests {
    use super::Spec;

    #[test]
    fn names_round_trip() {
        for spec in [Spec::Cancun, Spec::Prague] {
            assert_eq!(Spec::from_name(spec.name()), Some(spec));
        }
        assert_eq!(Spec::from_name("shanghai"), None);
    }
}
