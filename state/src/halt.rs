//! Why a node stopped writing: the one value the store latches when
//! something makes committing further blocks unsafe, and that every layer
//! (admission, RPC, consensus, the binary's exit) shows from there on.

use std::fmt;

use alloy_primitives::B256;

/// Why the node halted. The store keeps the first one it is given
/// (`Store::halt` in sluice-store); a node halts at most once and never resumes, so what
/// an operator reads in the logs, in `sluice_store_halted`, in an RPC error
/// and in the exit status is this same value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Halt {
    /// Writing block `height` failed (I/O, a full disk, the hash vault
    /// disagreeing with what was computed): it is not committed, and no
    /// later block can be.
    CommitFailed {
        /// The block whose commit failed.
        height: u64,
        /// The store's error.
        cause: String,
    },
    /// Executing block `height` could not read the state it needed;
    /// executing on state that was not read would diverge.
    ExecutionFailed {
        /// The block that could not be executed.
        height: u64,
        /// The state read's error.
        cause: String,
    },
    /// A read found the database damaged (a checksum, a missing record the
    /// store's own invariants promise).
    Damaged {
        /// What the read found.
        cause: String,
    },
    /// This node's app hash at `height` is not the one a quorum finalized:
    /// its state is wrong from `height` on, and reads of it are refused.
    Diverged {
        /// The first height whose state is known wrong.
        height: u64,
        /// The app hash this node computed there.
        ours: B256,
        /// The app hash the finalized chain carries for it.
        theirs: B256,
    },
    /// Block `height` was finalized with hash `finalized`, but this node had
    /// committed another block (`ours`) there: a fork, so its state is wrong
    /// from `height` on.
    Forked {
        /// The height of the two blocks.
        height: u64,
        /// The hash of the block this node committed.
        ours: B256,
        /// The hash of the block the quorum finalized.
        finalized: B256,
    },
    /// Supervision gave up: the actor at `site` failed more often than the
    /// policy allows within its window.
    GaveUp {
        /// The failing actor's name.
        site: String,
        /// How often it failed, and its last failure.
        cause: String,
    },
    /// The consensus layer cannot go on feeding blocks (a finalized block
    /// missing from its archive, too far behind its peers to catch up, a
    /// follower without its own last block).
    Consensus {
        /// What stopped it.
        cause: String,
    },
}

impl Halt {
    /// The first height whose state is known wrong, for a halt that makes
    /// this node's state untrustworthy ([`Halt::Diverged`], [`Halt::Forked`]);
    /// `None` for a halt after which what was committed is still right.
    pub fn wrong_from(&self) -> Option<u64> {
        match self {
            Halt::Diverged { height, .. } | Halt::Forked { height, .. } => Some(*height),
            _ => None,
        }
    }

    /// A short stable name of the kind, for logs and metrics labels.
    pub fn kind(&self) -> &'static str {
        match self {
            Halt::CommitFailed { .. } => "commit_failed",
            Halt::ExecutionFailed { .. } => "execution_failed",
            Halt::Damaged { .. } => "damaged",
            Halt::Diverged { .. } => "diverged",
            Halt::Forked { .. } => "forked",
            Halt::GaveUp { .. } => "gave_up",
            Halt::Consensus { .. } => "consensus",
        }
    }
}

impl fmt::Display for Halt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Halt::CommitFailed { height, cause } => write!(f, "commit of block {height} failed: {cause}"),
            Halt::ExecutionFailed { height, cause } => write!(f, "execution of block {height} failed: {cause}"),
            Halt::Damaged { cause } => write!(f, "the database is damaged: {cause}"),
            Halt::Diverged { height, ours, theirs } => write!(
                f,
                "app hash mismatch at height {height}: the finalized chain carries {theirs}, this node computed {ours}"
            ),
            Halt::Forked { height, ours, finalized } => {
                write!(f, "fork: block {height} was finalized as {finalized}, but this node committed {ours}")
            }
            Halt::GaveUp { site, cause } => write!(f, "supervision gave up on actor {site}: {cause}"),
            Halt::Consensus { cause } => write!(f, "consensus stopped: {cause}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_divergence_and_forks_make_state_wrong() {
        let disk = Halt::CommitFailed { height: 3, cause: "No space left on device".into() };
        assert_eq!(disk.wrong_from(), None);
        assert_eq!(disk.to_string(), "commit of block 3 failed: No space left on device");
        let diverged = Halt::Diverged { height: 7, ours: B256::ZERO, theirs: B256::repeat_byte(1) };
        assert_eq!(diverged.wrong_from(), Some(7));
        assert!(diverged.to_string().starts_with("app hash mismatch at height 7"));
        let fork = Halt::Forked { height: 9, ours: B256::ZERO, finalized: B256::repeat_byte(2) };
        assert_eq!((fork.wrong_from(), fork.kind()), (Some(9), "forked"));
    }
}
