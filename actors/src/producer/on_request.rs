//! On-request mode: blocks built for consensus, and transactions of failed
//! proposals put back.
//!
//! A build request waits in the actor (not in a `ctx.wait`, so wake-ups,
//! restores and newer requests are still handled) until the policy says it
//! is due; the producer then takes one block from the shards, seals it on
//! the request's parent and answers. A requester that went away gets
//! nothing built, or, if it left while the block was being built, the
//! taken transactions go back to the front of their shards: nothing
//! admitted is lost.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use actix::prelude::*;
use alloy_primitives::map::B256Set;
use sluice_messages::{Built, Parent, RecoveredTx, StateRef};
use tokio::sync::oneshot;

use super::{build, Decision, Producer};
use crate::supervise::Contained;

/// The longest a waiting request goes unlooked-at: a lost wake-up (the
/// nonce actor only offers it) delays a full block by this much at most.
const POLL_INTERVAL: Duration = Duration::from_millis(10);

/// A build request waiting to be served.
pub(super) struct Request {
    pub(super) parent: Parent,
    pub(super) timestamp: u64,
    pub(super) state_ref: Option<StateRef>,
    /// Transactions already in the blocks `parent` ends (not yet
    /// committed here): never proposed again.
    pub(super) exclude: Arc<B256Set>,
    pub(super) reply: oneshot::Sender<Built>,
}

impl Producer {
    /// A new build request; one still waiting is superseded (its reply is
    /// dropped, so its requester sees the producer decline it).
    pub(super) fn build_requested(&mut self, ctx: &mut Context<Self>, request: Request) {
        let decision = self.policy.build_requested(Instant::now(), self.counters.len());
        if decision == Decision::Decline {
            tracing::warn!(mode = ?self.settings.mode, "build request declined");
            return;
        }
        if self.request.replace(request).is_some() {
            tracing::debug!("a newer build request superseded the waiting one");
        }
        self.act(ctx, decision);
        self.schedule_poll(ctx);
    }

    /// Schedules a look at the waiting request, unless one is scheduled.
    fn schedule_poll(&mut self, ctx: &mut Context<Self>) {
        if self.poll_armed {
            return;
        }
        if let Some(wait) = self.policy.next_poll(Instant::now()) {
            self.poll_armed = true;
            ctx.run_later(wait.min(POLL_INTERVAL), |act, ctx| {
                act.poll_armed = false;
                act.poll(ctx);
            });
        }
    }

    fn poll(&mut self, ctx: &mut Context<Self>) {
        if self.request.as_ref().is_some_and(|r| r.reply.is_closed()) {
            self.request = None;
            self.policy.cancel_request();
            return;
        }
        let decision = self.policy.poll(Instant::now(), self.counters.len());
        self.act(ctx, decision);
        self.schedule_poll(ctx);
    }

    /// Builds the block for the waiting request and answers it, then tells
    /// the policy. The actor takes no other message meanwhile, so a restore
    /// or a newer request never overtakes the transactions taken here.
    pub(super) fn build(&mut self, ctx: &mut Context<Self>) {
        let request = match self.request.take() {
            Some(r) if !r.reply.is_closed() => r,
            _ => {
                let decision = self.policy.seal_finished(Instant::now(), false, self.counters.len());
                return self.act(ctx, decision);
            }
        };
        let start = Instant::now();
        let shards = self.shards.clone();
        let settings = self.settings.clone();
        let fut = Contained::new(async move {
            let txs = build::take_block(&shards, &settings, &request.exclude).await;
            let Request { parent, timestamp, state_ref, reply, .. } = request;
            let block = Arc::new(build::build_block(&parent, &settings, &txs, timestamp, state_ref));
            let number = block.header.number;
            if let Err(unwanted) = reply.send(Built { block, txs }) {
                tracing::debug!(
                    number,
                    n = unwanted.txs.len(),
                    "build requester gone; restoring its transactions"
                );
                build::restore_to_shards(&shards, unwanted.txs).await;
                return false;
            }
            true
        });
        ctx.wait(fut.into_actor(self).map(move |built, act, ctx| {
            let built = built.unwrap_or_else(|panic| {
                tracing::error!(panic, "building a block panicked; transactions it took may be lost");
                act.sup.panicked(&panic);
                false
            });
            act.metrics.handled(start);
            let decision = act.policy.seal_finished(Instant::now(), built, act.counters.len());
            act.act(ctx, decision);
            act.schedule_poll(ctx);
        }));
    }

    /// Puts a failed proposal's transactions back at the front of their
    /// shards, before anything else the producer does.
    pub(super) fn restore(&mut self, ctx: &mut Context<Self>, txs: Vec<RecoveredTx>) {
        if txs.is_empty() {
            return;
        }
        tracing::debug!(n = txs.len(), "restoring the transactions of a failed proposal");
        let shards = self.shards.clone();
        let fut = async move { build::restore_to_shards(&shards, txs).await };
        ctx.wait(fut.into_actor(self));
    }
}
