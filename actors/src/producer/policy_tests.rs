use super::*;

const BLOCK_TIME: Duration = Duration::from_millis(100);
const IDLE: Duration = Duration::from_millis(1000);
const FULL: usize = 10;

fn timer(t0: Instant) -> SealPolicy {
    SealPolicy::new(ProducerMode::Timer, BLOCK_TIME, FULL, Some(IDLE), t0)
}

fn on_request(t0: Instant) -> SealPolicy {
    SealPolicy::new(ProducerMode::OnRequest, BLOCK_TIME, FULL, Some(IDLE), t0)
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn seal(fill: Fill, trigger: Trigger) -> Decision {
    Decision::Seal { fill, trigger }
}

#[test]
fn a_tick_seals_only_when_something_waits() {
    let t0 = Instant::now();
    let mut p = timer(t0);
    assert_eq!(p.tick(t0 + ms(100), 0), Decision::Nothing);
    assert!(!p.busy());
    assert_eq!(p.tick(t0 + ms(200), 1), seal(Fill::TxsOnly, Trigger::Tick));
    assert!(p.busy());
    assert_eq!(p.seal_finished(t0 + ms(201), true, 0), Decision::Nothing);
    assert!(!p.busy());
}

#[test]
fn a_full_mempool_seals_by_count_and_a_backlog_back_to_back() {
    let t0 = Instant::now();
    let mut p = timer(t0);
    assert_eq!(p.wake(t0, 9), Decision::Nothing, "not a full block yet");
    assert_eq!(p.wake(t0, 25), seal(Fill::TxsOnly, Trigger::Wake));
    // Two full blocks still wait: the next seal follows at once, without
    // waiting for a tick (and without meeting the failpoint again).
    let next = p.seal_finished(t0 + ms(1), true, 15);
    assert_eq!(next, seal(Fill::TxsOnly, Trigger::Backlog));
    assert!(!Trigger::Backlog.strikes_faults() && Trigger::Wake.strikes_faults());
    assert_eq!(p.seal_finished(t0 + ms(2), true, 5), Decision::Nothing, "the rest waits for a tick");
}

#[test]
fn never_two_seals_in_flight_whatever_triggers_pile_up() {
    let t0 = Instant::now();
    let mut p = timer(t0);
    assert_eq!(p.tick(t0, 3), seal(Fill::TxsOnly, Trigger::Tick));
    // actix replays missed ticks in one poll; wake-ups and the idle timer
    // arrive too: none may start a second seal on the same parent.
    for k in 1..=5 {
        assert_eq!(p.tick(t0 + BLOCK_TIME * k, 50), Decision::Nothing);
    }
    assert_eq!(p.wake(t0, 50), Decision::Nothing);
    assert_eq!(p.idle_check(t0 + IDLE * 2), Decision::Nothing);
    assert_eq!(p.seal_finished(t0 + ms(600), true, 50), seal(Fill::TxsOnly, Trigger::Backlog));
    assert_eq!(p.tick(t0 + ms(700), 50), Decision::Nothing, "the backlog seal is in flight");
}

#[test]
fn the_idle_timer_seals_even_an_empty_mempool_counting_from_the_last_block() {
    let t0 = Instant::now();
    let mut p = timer(t0);
    assert_eq!(p.next_idle_check(t0), Some(IDLE));
    assert_eq!(p.idle_check(t0 + ms(999)), Decision::Nothing);
    assert_eq!(p.idle_check(t0 + IDLE), seal(Fill::EmptyAllowed, Trigger::Idle));
    // Overdue while the seal is in flight: look a whole interval later.
    assert_eq!(p.next_idle_check(t0 + ms(1500)), Some(IDLE));
    assert_eq!(p.seal_finished(t0 + ms(1200), true, 0), Decision::Nothing);
    assert_eq!(p.next_idle_check(t0 + ms(1300)), Some(ms(900)), "counts from the last block");
    assert_eq!(p.idle_check(t0 + ms(2100)), Decision::Nothing);
    // A seal that handed nothing on does not reset the idle clock.
    assert_eq!(p.tick(t0 + ms(2150), 1), seal(Fill::TxsOnly, Trigger::Tick));
    assert_eq!(p.seal_finished(t0 + ms(2160), false, 0), Decision::Nothing);
    assert_eq!(p.idle_check(t0 + ms(2200)), seal(Fill::EmptyAllowed, Trigger::Idle));
}

#[test]
fn no_idle_interval_means_no_idle_blocks() {
    let t0 = Instant::now();
    let mut p = SealPolicy::new(ProducerMode::Timer, BLOCK_TIME, FULL, None, t0);
    assert_eq!(p.next_idle_check(t0), None);
    assert_eq!(p.idle_check(t0 + IDLE * 100), Decision::Nothing);
}

#[test]
fn a_stall_holds_back_every_trigger_until_it_ends_but_not_a_backlog() {
    let t0 = Instant::now();
    let mut p = timer(t0);
    assert_eq!(p.tick(t0, 20), seal(Fill::TxsOnly, Trigger::Tick));
    p.stall(t0 + ms(300));
    // The seal that met the stall proceeds, and so does its backlog.
    assert_eq!(p.seal_finished(t0 + ms(1), true, 20), seal(Fill::TxsOnly, Trigger::Backlog));
    assert_eq!(p.seal_finished(t0 + ms(2), true, 5), Decision::Nothing);
    assert_eq!(p.tick(t0 + ms(100), 5), Decision::Nothing);
    assert_eq!(p.wake(t0 + ms(200), 50), Decision::Nothing);
    assert_eq!(p.tick(t0 + ms(300), 50), seal(Fill::TxsOnly, Trigger::Tick));
}

#[test]
fn a_lost_seal_frees_the_guard_and_waits_for_the_next_trigger() {
    let t0 = Instant::now();
    let mut p = timer(t0);
    assert_eq!(p.wake(t0, 30), seal(Fill::TxsOnly, Trigger::Wake));
    assert_eq!(p.seal_lost(30), Decision::Nothing, "no continuation skips the failpoint");
    assert!(!p.busy());
    assert_eq!(p.tick(t0 + BLOCK_TIME, 30), seal(Fill::TxsOnly, Trigger::Tick));
}

#[test]
fn flush_seals_until_empty_then_finishes_and_ignores_timers() {
    let t0 = Instant::now();
    let mut p = timer(t0);
    assert_eq!(p.flush(25), seal(Fill::TxsOnly, Trigger::Flush));
    assert!(!Trigger::Flush.strikes_faults());
    assert_eq!(p.tick(t0 + ms(100), 25), Decision::Nothing);
    assert_eq!(p.idle_check(t0 + IDLE * 3), Decision::Nothing);
    assert_eq!(p.next_idle_check(t0), None);
    assert_eq!(p.seal_finished(t0 + ms(1), true, 15), seal(Fill::TxsOnly, Trigger::Flush));
    assert_eq!(p.seal_finished(t0 + ms(2), true, 5), seal(Fill::TxsOnly, Trigger::Flush));
    assert_eq!(p.seal_finished(t0 + ms(3), true, 0), Decision::FinishFlush { left: 0 });
    assert_eq!(p.tick(t0 + ms(200), 5), Decision::Nothing, "done is done");
}

#[test]
fn flush_of_an_empty_mempool_finishes_at_once() {
    let mut p = timer(Instant::now());
    assert_eq!(p.flush(0), Decision::FinishFlush { left: 0 });
}

#[test]
fn flush_waits_for_the_seal_in_flight_instead_of_racing_it() {
    let t0 = Instant::now();
    let mut p = timer(t0);
    assert_eq!(p.tick(t0, 40), seal(Fill::TxsOnly, Trigger::Tick));
    assert_eq!(p.flush(40), Decision::Nothing);
    // The seal in flight finishes: the flush begins, not a backlog seal.
    assert_eq!(p.seal_finished(t0 + ms(1), true, 30), seal(Fill::TxsOnly, Trigger::Flush));
    // Nothing could be taken though transactions wait: give up, say so.
    assert_eq!(p.seal_finished(t0 + ms(2), false, 30), Decision::FinishFlush { left: 30 });
}

#[test]
fn flush_after_a_lost_seal_still_starts() {
    let t0 = Instant::now();
    let mut p = timer(t0);
    assert_eq!(p.tick(t0, 4), seal(Fill::TxsOnly, Trigger::Tick));
    assert_eq!(p.flush(4), Decision::Nothing);
    assert_eq!(p.seal_lost(4), seal(Fill::TxsOnly, Trigger::Flush));
}

#[test]
fn timer_mode_declines_build_requests() {
    let t0 = Instant::now();
    let mut p = timer(t0);
    assert_eq!(p.build_requested(t0, 100), Decision::Decline);
    assert_eq!(p.next_poll(t0), None);
}

#[test]
fn on_request_mode_never_seals_by_itself() {
    let t0 = Instant::now();
    let mut p = on_request(t0);
    assert_eq!(p.tick(t0 + BLOCK_TIME, 100), Decision::Nothing);
    assert_eq!(p.wake(t0, 100), Decision::Nothing, "no request waits");
    assert_eq!(p.idle_check(t0 + IDLE * 2), Decision::Nothing);
    assert_eq!(p.next_idle_check(t0), None);
}

#[test]
fn a_build_request_waits_for_a_full_block_or_block_time() {
    let t0 = Instant::now();
    let mut p = on_request(t0);
    assert_eq!(p.build_requested(t0, 3), Decision::Nothing);
    assert_eq!(p.next_poll(t0 + ms(40)), Some(ms(60)));
    assert_eq!(p.poll(t0 + ms(50), 9), Decision::Nothing);
    // By count: the mempool filled before block_time.
    assert_eq!(p.wake(t0 + ms(60), 10), Decision::Build);
    assert!(p.busy());
    assert_eq!(p.next_poll(t0 + ms(60)), None);
    assert_eq!(p.seal_finished(t0 + ms(61), true, 0), Decision::Nothing);

    // By time: an empty block once block_time has passed.
    let t1 = t0 + ms(1000);
    assert_eq!(p.build_requested(t1, 0), Decision::Nothing);
    assert_eq!(p.poll(t1 + ms(99), 0), Decision::Nothing);
    assert_eq!(p.poll(t1 + BLOCK_TIME, 0), Decision::Build);
    assert_eq!(p.poll(t1 + ms(200), 0), Decision::Nothing, "answered once");
}

#[test]
fn a_full_mempool_answers_a_build_at_once() {
    let t0 = Instant::now();
    let mut p = on_request(t0);
    assert_eq!(p.build_requested(t0, 10), Decision::Build);
}

#[test]
fn a_newer_request_supersedes_the_waiting_one_and_restarts_its_clock() {
    let t0 = Instant::now();
    let mut p = on_request(t0);
    assert_eq!(p.build_requested(t0, 0), Decision::Nothing);
    assert_eq!(p.build_requested(t0 + ms(80), 0), Decision::Nothing);
    assert_eq!(p.poll(t0 + ms(100), 0), Decision::Nothing, "the newer request's clock");
    assert_eq!(p.poll(t0 + ms(180), 0), Decision::Build);
}

#[test]
fn one_build_at_a_time_and_the_next_request_waits_for_it() {
    let t0 = Instant::now();
    let mut p = on_request(t0);
    assert_eq!(p.build_requested(t0, 10), Decision::Build);
    assert_eq!(p.build_requested(t0 + ms(1), 10), Decision::Nothing, "a build is in flight");
    assert_eq!(p.poll(t0 + ms(2), 10), Decision::Nothing);
    assert_eq!(p.seal_finished(t0 + ms(3), true, 10), Decision::Build, "served next");
}

#[test]
fn a_cancelled_request_is_never_built() {
    let t0 = Instant::now();
    let mut p = on_request(t0);
    assert_eq!(p.build_requested(t0, 0), Decision::Nothing);
    p.cancel_request();
    assert_eq!(p.poll(t0 + BLOCK_TIME * 2, 100), Decision::Nothing);
    assert_eq!(p.next_poll(t0), None);
}

#[test]
fn on_request_flush_seals_nothing_and_reports_what_is_left() {
    let t0 = Instant::now();
    let mut p = on_request(t0);
    assert_eq!(p.build_requested(t0, 0), Decision::Nothing);
    assert_eq!(p.flush(7), Decision::FinishFlush { left: 7 });
    assert_eq!(p.poll(t0 + BLOCK_TIME, 7), Decision::Nothing, "the waiting request is dropped");
    assert_eq!(p.build_requested(t0 + ms(1), 7), Decision::Decline);
}

#[test]
fn on_request_flush_waits_for_the_build_in_flight() {
    let t0 = Instant::now();
    let mut p = on_request(t0);
    assert_eq!(p.build_requested(t0, 10), Decision::Build);
    assert_eq!(p.flush(0), Decision::Nothing);
    assert_eq!(p.seal_finished(t0 + ms(1), true, 2), Decision::FinishFlush { left: 2 });
}

#[test]
fn an_idle_validator_waits_for_a_first_transaction_up_to_the_empty_wait() {
    let t0 = Instant::now();
    let mut p = on_request(t0).with_empty_wait(ms(900));
    // Nothing waits at block_time: keep waiting, polled until the end.
    assert_eq!(p.build_requested(t0, 0), Decision::Nothing);
    assert_eq!(p.poll(t0 + BLOCK_TIME, 0), Decision::Nothing);
    assert_eq!(p.next_poll(t0 + ms(150)), Some(ms(750)));
    // A first transaction after block_time is proposed at once.
    assert_eq!(p.poll(t0 + ms(400), 1), Decision::Build);
    assert_eq!(p.seal_finished(t0 + ms(401), true, 0), Decision::Nothing);
    // None comes: an empty block at the end of the wait, not before.
    let t1 = t0 + ms(1000);
    assert_eq!(p.build_requested(t1, 0), Decision::Nothing);
    assert_eq!(p.poll(t1 + ms(899), 0), Decision::Nothing);
    assert_eq!(p.poll(t1 + ms(900), 0), Decision::Build);
    assert_eq!(p.seal_finished(t1 + ms(901), true, 0), Decision::Nothing);
    // Under load nothing changes: block_time with something waiting, and
    // a full block at once.
    let t2 = t0 + ms(3000);
    assert_eq!(p.build_requested(t2, 3), Decision::Nothing);
    assert_eq!(p.poll(t2 + BLOCK_TIME, 3), Decision::Build);
    assert_eq!(p.seal_finished(t2 + ms(101), true, 0), Decision::Nothing);
    assert_eq!(p.build_requested(t2 + ms(200), 10), Decision::Build);
}

#[test]
fn an_empty_wait_shorter_than_block_time_changes_nothing() {
    let t0 = Instant::now();
    let mut p = on_request(t0).with_empty_wait(ms(10));
    assert_eq!(p.build_requested(t0, 0), Decision::Nothing);
    assert_eq!(p.poll(t0 + ms(50), 0), Decision::Nothing);
    assert_eq!(p.poll(t0 + BLOCK_TIME, 0), Decision::Build);
}
