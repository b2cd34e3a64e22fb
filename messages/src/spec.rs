//! The hard fork whose rules the chain follows.

use serde::{Deserialize, Serialize};

/// The EVM rule set: the same value configures admission, execution and the
/// store's chain identity, so it is defined once, here.
///
/// Variants are declared oldest first, so `spec >= Spec::Prague` reads
/// "Prague or later".
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Spec {
    /// Cancun (Dencun): EIP-1153 transient storage, EIP-6780 SELFDESTRUCT;
    /// no EIP-7623 calldata floor, no EIP-7702.
    Cancun,
    /// Prague (Pectra): adds EIP-7702 set-code transactions and the
    /// EIP-7623 calldata floor.
    Prague,
    /// Osaka (Fusaka): adds the EIP-7825 transaction gas cap (2^24), the
    /// EIP-7934 block size cap, CLZ (EIP-7939), P256VERIFY (EIP-7951) and
    /// the EIP-7823/7883 MODEXP bounds and prices. Its blob EIPs (7594,
    /// 7918, BPO forks) do not apply: sluice refuses blob transactions.
    #[default]
    Osaka,
}

impl Spec {
    /// Every selectable fork, oldest first.
    pub const ALL: [Spec; 3] = [Spec::Cancun, Spec::Prague, Spec::Osaka];

    /// Its lowercase name, as in the config file and the store's identity.
    pub fn name(self) -> &'static str {
        match self {
            Spec::Cancun => "cancun",
            Spec::Prague => "prague",
            Spec::Osaka => "osaka",
        }
    }

    /// The fork named `name` (as [`Spec::name`] spells it).
    pub fn from_name(name: &str) -> Option<Spec> {
        Spec::ALL.into_iter().find(|s| s.name() == name)
    }

    /// Whether EIP-7702 set-code transactions exist (Prague or later).
    pub fn has_eip7702(self) -> bool {
        self >= Spec::Prague
    }

    /// Whether the EIP-7825 transaction gas cap and the EIP-7934 block
    /// size cap apply (Osaka or later).
    pub fn has_osaka_caps(self) -> bool {
        self >= Spec::Osaka
    }
}

#[cfg(test)]
mod tests {
    use super::Spec;

    #[test]
    fn names_round_trip() {
        for spec in Spec::ALL {
            assert_eq!(Spec::from_name(spec.name()), Some(spec));
        }
        assert_eq!(Spec::from_name("shanghai"), None);
    }

    #[test]
    fn osaka_is_the_default_and_later_than_prague() {
        assert_eq!(Spec::default(), Spec::Osaka);
        assert!(Spec::Osaka.has_eip7702() && Spec::Prague.has_eip7702() && !Spec::Cancun.has_eip7702());
        assert!(Spec::Osaka.has_osaka_caps() && !Spec::Prague.has_osaka_caps());
    }
}
