//! Dead connections are noticed and redialled.
//!
//! Commonware's p2p layer sends a ping every `ping_frequency` but never
//! expects one: a connection whose path went dead (a cut link, a partition)
//! stays "connected" until the kernel gives up on it, which takes minutes.
//! When the path comes back, TCP resumes only at its next retransmission,
//! and after a 20 s cut the exponential backoff puts that 5-25 s away per
//! connection (`ss -ti` showed `backoff:6 rto:13056` at the heal). Votes
//! queued behind it waited, and a healed 2|2 split stayed stopped for
//! 27-30 s while every validator counted three peers.
//!
//! [`Idle`] wraps the handshake so that every authenticated connection
//! reads through an [`IdleStream`]: a read that sees no byte for
//! `idle_timeout` fails, the p2p layer drops the connection, and its dialer
//! opens a fresh one as soon as the path answers. Since every peer pings
//! every `ping_interval` (shorter than the idle timeout), only a silent
//! path trips it.

use std::{future::Future, pin::Pin, sync::Arc, time::Duration};

use commonware_macros::select;
use commonware_runtime::{Clock, Error, IoBufs, Sink, Stream};
use commonware_stream::Upgrader;
use rand_core::CryptoRng;

/// A timer from the runtime that owns the connections (the tokio runtime in
/// a node, the deterministic one in tests). Runtime contexts are not
/// `Clone`, and the upgrader hands its per-connection context on to the
/// handshake, so the timer is a context of its own, taken at construction.
type Sleep = Arc<dyn Fn(Duration) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync>;

fn sleeper<C: Clock>(clock: C) -> Sleep {
    Arc::new(move |d| Box::pin(clock.sleep(d)))
}

/// A handshake that hands the p2p layer streams which fail after
/// `idle_timeout` without a byte. Everything else is the inner upgrader's.
#[derive(Clone)]
pub struct Idle<U> {
    inner: U,
    idle_timeout: Duration,
    sleep: Sleep,
}

impl<U> Idle<U> {
    /// Wraps `inner`; `idle_timeout` must exceed the peers' ping interval;
    /// `clock` is a runtime context kept for the timers.
    pub fn new<C: Clock>(inner: U, idle_timeout: Duration, clock: C) -> Self {
        Self { inner, idle_timeout, sleep: sleeper(clock) }
    }
}

/// A raw stream whose every read fails with [`Error::Timeout`] when no byte
/// arrives within the idle timeout. The read it abandons poisons the stream,
/// which is what we want: the connection is dead.
pub struct IdleStream<I> {
    inner: I,
    idle_timeout: Duration,
    sleep: Sleep,
}

impl<I: Stream> IdleStream<I> {
    fn new(inner: I, idle_timeout: Duration, sleep: &Sleep) -> Self {
        Self { inner, idle_timeout, sleep: sleep.clone() }
    }
}

impl<I: Stream> Stream for IdleStream<I> {
    fn recv(&mut self, len: usize) -> impl Future<Output = Result<IoBufs, Error>> + Send {
        let deadline = (self.sleep)(self.idle_timeout);
        let idle_timeout = self.idle_timeout;
        let read = self.inner.recv(len);
        async move {
            select! {
                result = read => result,
                _ = deadline => {
                    metrics::counter!(crate::metrics::P2P_IDLE_DISCONNECTS).increment(1);
                    tracing::debug!(?idle_timeout, "a peer sent nothing for the idle timeout; dropping its connection");
                    Err(Error::Timeout)
                },
            }
        }
    }

    fn peek(&self, max_len: usize) -> &[u8] {
        self.inner.peek(max_len)
    }
}

impl<U: Upgrader> Upgrader for Idle<U> {
    const MAX_SIZE: u32 = U::MAX_SIZE;

    type PublicKey = U::PublicKey;
    type Error = U::Error;
    type Sender<I: Stream, O: Sink> = U::Sender<IdleStream<I>, O>;
    type Receiver<I: Stream, O: Sink> = U::Receiver<IdleStream<I>, O>;

    fn public_key(&self) -> Self::PublicKey {
        self.inner.public_key()
    }

    fn dial<C, I, O>(
        self,
        context: C,
        namespace: &[u8],
        max_message_size: u32,
        peer: Self::PublicKey,
        stream: I,
        sink: O,
    ) -> impl Future<Output = Result<(Self::Sender<I, O>, Self::Receiver<I, O>), Self::Error>> + Send
    where
        C: Clock + CryptoRng,
        I: Stream,
        O: Sink,
    {
        let stream = IdleStream::new(stream, self.idle_timeout, &self.sleep);
        self.inner.dial(context, namespace, max_message_size, peer, stream, sink)
    }

    fn listen<C, I, O, B, F>(
        self,
        context: C,
        namespace: &[u8],
        max_message_size: u32,
        bouncer: B,
        stream: I,
        sink: O,
    ) -> impl Future<Output = Result<(Self::PublicKey, Self::Sender<I, O>, Self::Receiver<I, O>), Self::Error>>
           + Send
    where
        C: Clock + CryptoRng,
        I: Stream,
        O: Sink,
        B: FnOnce(Self::PublicKey) -> F + Send,
        F: Future<Output = bool> + Send,
    {
        let stream = IdleStream::new(stream, self.idle_timeout, &self.sleep);
        self.inner.listen(context, namespace, max_message_size, bouncer, stream, sink)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use commonware_runtime::{deterministic, mocks, Runner as _, Spawner as _, Supervisor as _};

    #[test]
    fn a_silent_stream_fails_after_the_idle_timeout_and_a_talking_one_does_not() {
        deterministic::Runner::default().start(|ctx| async move {
            let (mut sink, stream) = mocks::Channel::init();
            let sleep = sleeper(ctx.child("idle"));
            let mut idle = IdleStream::new(stream, Duration::from_secs(3), &sleep);

            // Bytes every second: every read completes.
            let writer = ctx.child("writer").spawn(move |ctx| async move {
                for i in 0..3u8 {
                    ctx.sleep(Duration::from_secs(1)).await;
                    sink.send(vec![i]).await.expect("mock sink");
                }
                // Then silence, with the sink kept open.
                ctx.sleep(Duration::from_secs(60)).await;
                drop(sink);
            });
            for i in 0..3u8 {
                let got = idle.recv(1).await.expect("a byte within the idle timeout");
                assert_eq!(got.coalesce().as_ref(), &[i]);
            }
            let before = ctx.current();
            assert!(matches!(idle.recv(1).await, Err(Error::Timeout)));
            let waited = ctx.current().duration_since(before).expect("clock moves forward");
            assert_eq!(waited, Duration::from_secs(3));
            writer.abort();
        });
    }
}
