//! What the scenarios check against: the [`Recorder`] of every node's
//! commits, the evidence counter, and the sections marshal's archives keep.

use std::{
    collections::{BTreeMap, HashMap},
    sync::Arc,
};

use alloy_primitives::B256;
use parking_lot::Mutex;
use sluice_messages::ExecutedBlock;

use super::network::Sim;

/// What every node committed: (node, height) -> (block hash, app hash),
/// and each node's receipts by transaction hash.
#[derive(Clone, Default)]
pub(crate) struct Recorder {
    inner: Arc<Mutex<RecorderInner>>,
}

#[derive(Default)]
struct RecorderInner {
    blocks: BTreeMap<(usize, u64), (B256, B256)>,
    receipts: HashMap<usize, HashMap<B256, u64>>,
    /// Entries executed as skipped (nonce already taken), per node.
    skipped: HashMap<usize, u64>,
    heads: HashMap<usize, u64>,
}

impl Recorder {
    /// Records `block` as committed by `node`, checking it against what
    /// that node committed at the height before a crash.
    pub(super) fn committed(&self, node: usize, block: &ExecutedBlock, app_hash: B256) {
        let mut r = self.inner.lock();
        let number = block.block.header.number;
        if let Some((hash, app)) = r.blocks.get(&(node, number)) {
            // A rebuilt node must commit exactly what it did before.
            assert_eq!(
                (*hash, *app),
                (block.block.hash, app_hash),
                "node {node} changed its mind at {number}"
            );
        }
        r.blocks.insert((node, number), (block.block.hash, app_hash));
        let receipts = r.receipts.entry(node).or_default();
        for rc in &block.receipts {
            let prev = receipts.insert(rc.tx_hash, number);
            assert!(prev.is_none_or(|p| p == number), "node {node}: tx {} included twice", rc.tx_hash);
        }
        *r.skipped.entry(node).or_default() += block.skipped.len() as u64;
        r.heads.insert(node, number);
    }

    /// Entries `node` executed as skipped so far.
    pub(crate) fn skipped(&self, node: usize) -> u64 {
        self.inner.lock().skipped.get(&node).copied().unwrap_or(0)
    }

    /// Forgets a crashed node's head (its store is gone).
    pub(super) fn crashed(&self, node: usize) {
        self.inner.lock().heads.insert(node, 0);
    }

    /// The height `node` committed last (0 after a crash).
    pub(crate) fn head(&self, node: usize) -> u64 {
        self.inner.lock().heads.get(&node).copied().unwrap_or(0)
    }

    /// Every block committed by every node in `nodes` at heights
    /// `1..=upto` is the same block with the same app hash.
    pub(crate) fn assert_identical(&self, nodes: &[usize], upto: u64) {
        let r = self.inner.lock();
        for h in 1..=upto {
            let first =
                r.blocks.get(&(nodes[0], h)).unwrap_or_else(|| panic!("node {} has no block {h}", nodes[0]));
            for n in &nodes[1..] {
                let other = r.blocks.get(&(*n, h)).unwrap_or_else(|| panic!("node {n} has no block {h}"));
                assert_eq!(first, other, "nodes {} and {n} disagree at height {h}", nodes[0]);
            }
        }
    }

    /// The height of `hash`'s receipt on `node`, if it has one.
    pub(crate) fn receipt_height(&self, node: usize, hash: &B256) -> Option<u64> {
        self.inner.lock().receipts.get(&node)?.get(hash).copied()
    }

    /// Every transaction in `sent` has exactly one receipt on `node`.
    pub(crate) fn assert_receipts(&self, node: usize, sent: &[B256]) {
        let r = self.inner.lock();
        let receipts = r.receipts.get(&node).expect("node committed nothing");
        for h in sent {
            assert!(receipts.contains_key(h), "node {node}: no receipt for {h}");
        }
    }
}

impl Sim {
    /// The sections (first heights) validator `i`'s finalized archives
    /// hold, by partition (each archive's keys and values): what pruning
    /// bounds. Listing a partition opens no blob, so the running
    /// validator's archives are not disturbed.
    pub(crate) async fn archive_sections(&self, i: usize) -> Vec<(String, Vec<u64>)> {
        let mut out = Vec::new();
        for archive in crate::archives::ARCHIVES {
            for kind in ["key", "value"] {
                let partition = crate::archives::archive_partition(&format!("v{i}"), archive, kind);
                let sections = crate::archives::archive_sections(&self.ctx, &partition).await;
                out.push((partition, sections));
            }
        }
        out
    }
}

/// Evidence counted by `sluice_consensus_evidence_total` of `kind` in this
/// process so far (a recorder installed on first use: no other test here
/// reports evidence).
pub(crate) fn evidence_counted(kind: &str) -> u64 {
    use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
    static SNAPSHOTS: std::sync::OnceLock<Option<Snapshotter>> = std::sync::OnceLock::new();
    let snapshots = SNAPSHOTS.get_or_init(|| {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        metrics::set_global_recorder(recorder).ok().map(|()| snapshotter)
    });
    let Some(snapshots) = snapshots else { return 0 };
    snapshots
        .snapshot()
        .into_vec()
        .into_iter()
        .filter(|(key, ..)| {
            let key = key.key();
            key.name() == crate::metrics::EVIDENCE_TOTAL && key.labels().any(|l| l.value() == kind)
        })
        .map(|(.., value)| if let DebugValue::Counter(n) = value { n } else { 0 })
        .sum()
}
