//! The precompiles each spec runs, named as EIP-7910 names them, for
//! `eth_config`.
//!
//! The set is revm's for the spec, the same set block execution and calls
//! get (nothing in sluice adds, moves or removes a precompile), so what
//! `eth_config` reports is what the EVM runs, not a second list to keep in
//! step by hand. Only the names are ours: [`EIP7910_NAMES`].

use alloy_primitives::Address;
use revm::precompile::{PrecompileSpecId, Precompiles};

use crate::env::{spec_id, Spec};

/// EIP-7910's name for each precompile address (the address's low two
/// bytes; every Ethereum precompile sits below 0x10000). The names are the
/// ones geth answers (`core/vm/contracts.go`) and the EIP's example uses:
/// EIP-2537's BLS pairing is `BLS12_PAIRING_CHECK`, EIP-7951's secp256r1
/// check `P256VERIFY`.
pub const EIP7910_NAMES: &[(u16, &str)] = &[
    (0x01, "ECREC"),
    (0x02, "SHA256"),
    (0x03, "RIPEMD160"),
    (0x04, "ID"),
    (0x05, "MODEXP"),
    (0x06, "BN254_ADD"),
    (0x07, "BN254_MUL"),
    (0x08, "BN254_PAIRING"),
    (0x09, "BLAKE2F"),
    (0x0a, "KZG_POINT_EVALUATION"),
    (0x0b, "BLS12_G1ADD"),
    (0x0c, "BLS12_G1MSM"),
    (0x0d, "BLS12_G2ADD"),
    (0x0e, "BLS12_G2MSM"),
    (0x0f, "BLS12_PAIRING_CHECK"),
    (0x10, "BLS12_MAP_FP_TO_G1"),
    (0x11, "BLS12_MAP_FP2_TO_G2"),
    (0x0100, "P256VERIFY"),
];

/// EIP-7910's name for the precompile at `address`, if it is one of
/// [`EIP7910_NAMES`].
pub fn eip7910_name(address: &Address) -> Option<&'static str> {
    // Precompile addresses are 18 zero bytes then the two of the table.
    let (high, low) = address.as_slice().split_at(18);
    if high.iter().any(|b| *b != 0) {
        return None;
    }
    let low = u16::from_be_bytes([low[0], low[1]]);
    EIP7910_NAMES.iter().find(|(a, _)| *a == low).map(|(_, name)| *name)
}

/// Every precompile `spec` runs, as (name, address), ordered by address.
///
/// A precompile missing from [`EIP7910_NAMES`] (one a later revm adds to a
/// spec) keeps the name revm gives it rather than vanishing from the
/// answer: a client reading `eth_config` must see every precompile that
/// runs. The tests hold that no spec sluice selects needs that fallback.
pub fn active(spec: Spec) -> Vec<(&'static str, Address)> {
    let set = Precompiles::new(PrecompileSpecId::from_spec_id(spec_id(spec)));
    let mut named: Vec<(&'static str, Address)> = set
        .addresses()
        .filter_map(|address| {
            let name = eip7910_name(address).or_else(|| set.get(address).map(|p| p.id().name()))?;
            Some((name, *address))
        })
        .collect();
    named.sort_by_key(|(_, address)| *address);
    named
}

#[cfg(test)]
mod tests {
    use revm::precompile::u64_to_address;

    use super::*;

    #[test]
    fn every_precompile_of_every_spec_has_an_eip7910_name_and_revm_agrees() {
        for spec in Spec::ALL {
            let set = Precompiles::new(PrecompileSpecId::from_spec_id(spec_id(spec)));
            for address in set.addresses() {
                let ours = eip7910_name(address);
                assert!(ours.is_some(), "{spec:?}: {address} has no EIP-7910 name");
                // revm 43 names its precompiles after EIP-7910 too: a
                // disagreement means one of the two tables is wrong.
                let revm = set.get(address).map(|p| p.id().name());
                assert_eq!(ours, revm, "{spec:?}: {address}");
            }
            assert_eq!(active(spec).len(), set.len(), "{spec:?}: a precompile went missing");
        }
    }

    #[test]
    fn each_spec_runs_the_precompiles_its_eips_bring() {
        let names = |spec| active(spec).into_iter().map(|(n, _)| n).collect::<Vec<_>>();
        let cancun = names(Spec::Cancun);
        assert_eq!(cancun.len(), 10);
        assert_eq!(cancun.first(), Some(&"ECREC"));
        assert_eq!(cancun.last(), Some(&"KZG_POINT_EVALUATION"));
        // Prague: EIP-2537's seven BLS12-381 precompiles (0x0b..=0x11).
        let prague = names(Spec::Prague);
        assert_eq!(prague.len(), 17);
        assert!(prague.contains(&"BLS12_PAIRING_CHECK") && !prague.contains(&"P256VERIFY"));
        // Osaka: EIP-7951's P256VERIFY at 0x100, MODEXP repriced in place.
        let osaka = active(Spec::Osaka);
        assert_eq!(osaka.len(), 18);
        assert_eq!(osaka.last(), Some(&("P256VERIFY", u64_to_address(0x100))));
    }

    #[test]
    fn addresses_outside_the_table_have_no_name() {
        assert_eq!(eip7910_name(&u64_to_address(0x12)), None);
        assert_eq!(eip7910_name(&u64_to_address(0x1_0001)), None);
        assert_eq!(eip7910_name(&Address::repeat_byte(1)), None);
        assert_eq!(eip7910_name(&u64_to_address(0x0100)), Some("P256VERIFY"));
    }
}
