//! An injected `stall(MS)` failpoint as a stage takes it: the message that
//! fired it is handled, then no other message is until the stall ends.
//! Shared by the stages whose failpoint can stall their mailbox.

use std::time::{Duration, Instant};

use actix::prelude::*;

/// A stage's injected stall, if one is in force.
#[derive(Debug, Default)]
pub struct Stall {
    until: Option<Instant>,
}

impl Stall {
    /// Starts a stall of `d` from now.
    pub fn start(&mut self, d: Duration) {
        self.until = Some(Instant::now() + d);
    }

    /// Lets the next message through: if the stall is still in force, the
    /// caller must redeliver that message at its end ([`redeliver_at`]).
    pub fn deadline(&mut self) -> Option<Instant> {
        self.until.take().filter(|until| *until > Instant::now())
    }
}

/// Handles `msg` again at `until`, and no other message before it (the
/// actor waits, so its mailbox keeps its order).
pub fn redeliver_at<A, M>(until: Instant, act: &A, ctx: &mut Context<A>, msg: M)
where
    A: Actor<Context = Context<A>> + StreamHandler<M>,
    M: 'static,
{
    let wait = tokio::time::sleep_until(until.into());
    ctx.wait(wait.into_actor(act).map(move |_, act, ctx| <A as StreamHandler<M>>::handle(act, msg, ctx)));
}
