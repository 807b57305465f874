//! Transcript tests of the probe timer's two rule sets on virtual time
//! (`tcp.tlp_timer`): RFC 8985 §7.2 against Linux 6.x `tcp_schedule_loss_probe`
//! (net/ipv4/tcp_output.c) and its callers (`tcp_write_xmit`, `tcp_set_xmit_timer`,
//! `tcp_rack_mark_lost`). Each situation runs under both rules, so each test fails if
//! the two stop differing where the kernel differs from the RFC.

use super::mechanism_tests::{cfg, ms};
use super::*;
use crate::time::Duration;

fn sender(timer: TlpTimer) -> Sender {
    Sender::new(cfg(Mechanisms { rack_tlp: true, dsack: true, tlp_timer: timer, ..Default::default() }))
}

fn ack(ack: u64, sack: &[(u64, u64)]) -> Ack {
    Ack { ack, wnd: 1 << 20, sack: SackBlocks::from_slice(sack) }
}

/// One 1000-byte segment sent at 0 and ACKed at 100 ms: SRTT 100 ms, RTTVAR 50 ms,
/// RTO = max(100 + 4·50, 200) = 300 ms (RFC 6298).
fn with_srtt_100(timer: TlpTimer) -> Sender {
    let mut s = sender(timer);
    s.write(1000);
    s.poll_transmit(ms(0)).expect("a segment");
    s.handle_ack(ms(100), &ack(1000, &[]));
    assert_eq!(s.rtt().srtt(), Some(Duration::from_millis(100)));
    s
}

/// Send everything written, at `now`.
fn send_all(s: &mut Sender, now: crate::time::Instant) -> usize {
    std::iter::from_fn(|| s.poll_transmit(now)).count()
}

#[test]
fn pto_is_two_srtt_plus_two_ms_with_several_segments_in_flight() {
    for (timer, want) in [(TlpTimer::Rfc, 1200), (TlpTimer::Linux, 1202)] {
        let mut s = with_srtt_100(timer);
        s.write(3000);
        assert_eq!(send_all(&mut s, ms(1000)), 3);
        // Linux: `srtt_us >> 2` + TCP_TIMEOUT_MIN_US; RFC 8985 §7.2: 2·SRTT.
        assert_eq!(s.tlp_deadline(), Some(ms(want)), "{timer:?}");
        assert_eq!(s.poll_timeout(), Some(ms(want)), "{timer:?}: the probe comes before the RTO (1300)");
    }
}

#[test]
fn one_segment_in_flight_adds_the_minimum_rto_not_the_delayed_ack_bound() {
    // rto_min 100 ms: Linux adds `tcp_rto_min_us` (100), RFC 8985 WCDelAckT (200).
    for (timer, want) in [(TlpTimer::Rfc, 1000 + 200 + 200), (TlpTimer::Linux, 1000 + 200 + 100)] {
        let mut c = cfg(Mechanisms { rack_tlp: true, tlp_timer: timer, ..Default::default() });
        c.rto.min = Duration::from_millis(100);
        let mut s = Sender::new(c);
        s.write(1000);
        s.poll_transmit(ms(0));
        s.handle_ack(ms(100), &ack(1000, &[])); // SRTT 100, RTO 300
                                                // A second sample of 400 ms: SRTT 137.5, RTTVAR 112.5, RTO 587.5 ms.
        s.write(1000);
        s.poll_transmit(ms(200));
        s.handle_ack(ms(600), &ack(2000, &[]));
        assert_eq!(s.rtt().srtt(), Some(Duration::from_micros(137_500)));
        s.write(1000);
        s.poll_transmit(ms(1000));
        let pto = Duration::from_micros(275_000) + Duration::from_millis(want - 1000 - 200);
        assert_eq!(s.tlp_deadline(), Some(ms(1000) + pto), "{timer:?}");
    }
}

#[test]
fn a_duplicate_ack_re_arms_the_rfc_probe_but_not_linuxs() {
    for (timer, want) in [(TlpTimer::Rfc, 1300), (TlpTimer::Linux, 1202)] {
        let mut s = with_srtt_100(timer);
        s.write(3000);
        send_all(&mut s, ms(1000));
        s.handle_ack(ms(1150), &ack(1000, &[])); // acknowledges nothing new
                                                 // RFC: re-armed at 1150 + 200, capped by the RTO at 1300. Linux: no
                                                 // FLAG_SET_XMIT_TIMER, the probe stays where it was.
        assert_eq!(s.tlp_deadline(), Some(ms(want)), "{timer:?}");
    }
}

#[test]
fn after_new_data_the_cap_is_the_oldest_segments_rto() {
    // Segments at 1000 and 1010; the first ACKed at 1100 (SRTT 100, RTTVAR 37.5,
    // RTO 250 ms from then); new data at 1200. Linux caps by `tcp_rto_delta_us`: the
    // oldest outstanding segment (1010) + RTO = 1260. RFC: the running RTO timer, 1350.
    for (timer, want) in [(TlpTimer::Rfc, 1350), (TlpTimer::Linux, 1260)] {
        let mut s = with_srtt_100(timer);
        s.write(1000);
        send_all(&mut s, ms(1000));
        s.write(1000);
        send_all(&mut s, ms(1010));
        s.handle_ack(ms(1100), &ack(2000, &[]));
        assert_eq!(s.current_rto(), Duration::from_millis(250));
        s.write(1000);
        send_all(&mut s, ms(1200));
        assert_eq!(s.tlp_deadline(), Some(ms(want)), "{timer:?}");
    }
}

#[test]
fn the_reordering_timer_takes_the_probes_slot_in_linux() {
    for timer in [TlpTimer::Rfc, TlpTimer::Linux] {
        let mut s = with_srtt_100(timer);
        s.write(3000);
        send_all(&mut s, ms(1000));
        // The third segment SACKed at 1100, the first two not: RACK waits for
        // RTT + reo_wnd (min_RTT/4) = 1125 before marking them.
        s.handle_ack(ms(1100), &ack(1000, &[(3000, 4000)]));
        assert_eq!(s.poll_timeout(), Some(ms(1125)), "{timer:?}");
        match timer {
            TlpTimer::Rfc => assert!(s.tlp_deadline().is_some(), "RFC 8985: both timers run"),
            TlpTimer::Linux => assert_eq!(s.tlp_deadline(), None, "one slot: ICSK_TIME_REO_TIMEOUT"),
        }
    }
}

#[test]
fn a_fast_retransmission_of_the_oldest_segment_restarts_linuxs_rto() {
    // Linux `tcp_xmit_retransmit_queue`: retransmitting the head (no reordering timer
    // pending) restarts the RTO from now; RFC 6298 (5.3) waits for an ACK of new data.
    for (restart, want) in [(RtoRestart::Rfc6298, 1300), (RtoRestart::Linux, 1160 + 300)] {
        let mut s = Sender::new(cfg(Mechanisms {
            rack_tlp: true,
            dsack: true,
            rto_restart: restart,
            ..Default::default()
        }));
        s.write(1000);
        s.poll_transmit(ms(0));
        s.handle_ack(ms(100), &ack(1000, &[])); // SRTT 100, RTO 300
        s.write(1000);
        send_all(&mut s, ms(1000)); // the head, lost
        s.write(1000);
        send_all(&mut s, ms(1060)); // a later one, SACKed: the head is marked lost at once
        s.handle_ack(ms(1160), &ack(1000, &[(2000, 3000)]));
        assert!(s.in_recovery(), "{restart:?}");
        let rtx = s.poll_transmit(ms(1160)).expect("the head's retransmission");
        assert_eq!((rtx.seq, rtx.retransmission), (1000, true));
        assert_eq!(s.poll_timeout(), Some(ms(want)), "{restart:?}");
    }
}
