//! Raw transaction bytes through admission: decoding, every stateless
//! check and sender recovery. Must never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let rules = sluice_fuzz::rules();
    let _ = sluice_txpool::admit_stateless(alloy_primitives::Bytes::copy_from_slice(data), &rules);
});
