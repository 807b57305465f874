//! Fuzzing of the trunk frame decoder (`thinwan_proto::mux::frame`), the first code to
//! see bytes from the network after TLS. cargo-fuzz needs a nightly toolchain, so this is
//! a long-running proptest instead (issue 15): arbitrary bytes, and valid encodings with
//! mutations (bit flips, overwritten bytes and length fields, cuts, insertions), fed
//! whole and through the incremental [`FrameDecoder`] in arbitrary pieces. For every
//! input:
//!
//! - decoding never panics;
//! - a decode allocates at most the body length its header declares, which is itself
//!   at most the caller's bound (`max_body`) — measured with a counting allocator;
//! - the decoder never buffers a whole frame's worth beyond the bound;
//! - a decoded frame re-encodes to the bytes it came from (except flag bits the frame
//!   type does not define, which are ignored on receipt) and decodes to itself again.
//!
//! CI runs 5,000 cases per property (~0.2 s); 300,000 take ~11 s, so an overnight run
//! covers a few hundred million:
//!
//! ```text
//! PROPTEST_CASES=1000000 cargo test --release -p thinwan-mux --test frame_fuzz
//! ```
//!
//! It lives here rather than next to the codec in `crates/proto` because the counting
//! allocator must be the test binary's global allocator, and this binary has no other
//! tests whose allocations it would see.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use proptest::prelude::*;
use thinwan_proto::mux::frame::{FLAG_CLOSE_OK, FLAG_PONG, HEADER_LEN};
use thinwan_proto::mux::{Frame, FrameDecoder, FrameType, Hello, ResetCode};

/// Counts the bytes allocated by the current thread (proptest runs cases on one thread;
/// the test harness may run other tests on others).
struct Counting;

thread_local! {
    static ALLOCATED: Cell<usize> = const { Cell::new(0) };
}

fn count(n: usize) {
    // `try_with`: allocations during thread teardown are simply not counted.
    let _ = ALLOCATED.try_with(|c| c.set(c.get() + n));
}

// SAFETY: forwards to `System`; only adds bookkeeping in a thread-local `Cell`, which
// does not allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        count(l.size());
        System.alloc(l)
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        count(l.size());
        System.alloc_zeroed(l)
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        count(new.saturating_sub(l.size()));
        System.realloc(p, l, new)
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        System.dealloc(p, l)
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Run `f`; also return the bytes it allocated.
fn allocated_by<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let before = ALLOCATED.with(Cell::get);
    let r = f();
    (r, ALLOCATED.with(Cell::get) - before)
}

/// Cases per property: a few thousand in CI, `PROPTEST_CASES` for long runs.
fn cases(ci: u32) -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(ci)
}

/// The body length a header declares (bytes 8..12), if there is a header.
fn declared(buf: &[u8]) -> Option<usize> {
    buf.get(8..12).map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize)
}

/// Flag bits a frame type defines; the decoder ignores the others.
fn defined_flags(kind: u8) -> u8 {
    match kind {
        k if k == FrameType::Hello as u8 => 0xff,
        k if k == FrameType::Ping as u8 => FLAG_PONG,
        k if k == FrameType::LaneClose as u8 => FLAG_CLOSE_OK,
        _ => 0,
    }
}

/// Decode the front of `buf` with bound `max` and check every property above.
fn check_decode(buf: &[u8], max: u32) -> Result<Option<usize>, TestCaseError> {
    let (r, bytes) = allocated_by(|| Frame::decode(buf, max));
    let declared = declared(buf).unwrap_or(0);
    match r {
        Err(_) => {
            // Errors are found before any body is copied, except a body that fails
            // late (e.g. a name that is not UTF-8); either way within the bound.
            prop_assert!(bytes <= declared.min(max as usize), "{bytes} bytes allocated for an error");
            Ok(None)
        }
        Ok(None) => {
            prop_assert_eq!(bytes, 0, "nothing allocated while waiting for more bytes");
            prop_assert!(buf.len() < HEADER_LEN || buf.len() < HEADER_LEN + declared);
            Ok(None)
        }
        Ok(Some((frame, used))) => {
            prop_assert_eq!(used, HEADER_LEN + declared);
            prop_assert!(declared <= max as usize, "body {declared} over the bound {max}");
            prop_assert!(bytes <= declared, "{bytes} bytes allocated for a {declared}-byte body");
            prop_assert_eq!(frame.encoded_len(), used);
            let mut again = Vec::new();
            frame.encode(&mut again);
            prop_assert_eq!(again[0], buf[0]);
            prop_assert_eq!(again[1], buf[1] & defined_flags(buf[0]), "flags");
            prop_assert_eq!(&again[2..], &buf[2..used], "re-encoding gives the same bytes");
            prop_assert_eq!(Frame::decode(&again, max).ok().flatten().map(|x| x.0), Some(frame));
            Ok(Some(used))
        }
    }
}

fn arb_code() -> impl Strategy<Value = ResetCode> {
    any::<u16>().prop_map(ResetCode::from_u16)
}

fn arb_frame() -> impl Strategy<Value = Frame> {
    let sid = 1u32..;
    prop_oneof![
        (sid.clone(), "\\PC{1,60}").prop_map(|(stream, target)| Frame::Open { stream, target }),
        (sid.clone(), proptest::collection::vec(any::<u8>(), 1..3000))
            .prop_map(|(stream, payload)| Frame::Data { stream, payload }),
        sid.clone().prop_map(|stream| Frame::Close { stream }),
        (sid.clone(), arb_code(), "\\PC{0,80}").prop_map(|(stream, code, message)| Frame::Reset {
            stream,
            code,
            message
        }),
        (sid, 1u32..).prop_map(|(stream, increment)| Frame::Credit { stream, increment }),
        any::<u64>().prop_map(|next_expected| Frame::Ack { next_expected }),
        (any::<bool>(), any::<u64>()).prop_map(|(pong, opaque)| Frame::Ping { pong, opaque }),
        (any::<u64>(), 1u16.., any::<u64>(), any::<u32>(), any::<u8>()).prop_flat_map(
            |(session, lanes, next_expected, window, flags)| {
                (0..lanes).prop_map(move |lane| {
                    Frame::Hello(Hello { session, lane, lanes, next_expected, window, flags })
                })
            }
        ),
        arb_code().prop_map(|code| Frame::GoAway { code }),
        (1u16..).prop_map(|want| Frame::Lanes { want }),
        any::<bool>().prop_map(|ok| Frame::LaneClose { ok }),
    ]
}

/// A change to an encoded stream; positions are taken modulo its length.
#[derive(Clone, Debug)]
enum Mutation {
    FlipBit(usize, u8),
    SetByte(usize, u8),
    /// Overwrite 4 bytes (a length or stream field when it lands on one).
    SetU32(usize, u32),
    Truncate(usize),
    Insert(usize, Vec<u8>),
    Delete(usize, usize),
}

fn arb_mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), 0u8..8).prop_map(|(p, b)| Mutation::FlipBit(p, b)),
        (any::<usize>(), any::<u8>()).prop_map(|(p, v)| Mutation::SetByte(p, v)),
        (any::<usize>(), prop_oneof![any::<u32>(), 0u32..100, Just(u32::MAX)])
            .prop_map(|(p, v)| Mutation::SetU32(p, v)),
        any::<usize>().prop_map(Mutation::Truncate),
        (any::<usize>(), proptest::collection::vec(any::<u8>(), 1..40))
            .prop_map(|(p, b)| Mutation::Insert(p, b)),
        (any::<usize>(), 1usize..40).prop_map(|(p, n)| Mutation::Delete(p, n)),
    ]
}

fn apply(wire: &mut Vec<u8>, m: &Mutation) {
    let at = |p: usize, len: usize| if len == 0 { 0 } else { p % len };
    let len = wire.len();
    match m {
        Mutation::FlipBit(p, b) if len > 0 => wire[at(*p, len)] ^= 1 << b,
        Mutation::SetByte(p, v) if len > 0 => wire[at(*p, len)] = *v,
        Mutation::SetU32(p, v) if len >= 4 => {
            let i = at(*p, len - 3);
            wire[i..i + 4].copy_from_slice(&v.to_be_bytes());
        }
        Mutation::Truncate(p) => wire.truncate(at(*p, len + 1)),
        Mutation::Insert(p, b) => {
            let i = at(*p, len + 1);
            wire.splice(i..i, b.iter().copied());
        }
        Mutation::Delete(p, n) if len > 0 => {
            let i = at(*p, len);
            wire.drain(i..(i + n).min(len));
        }
        _ => {}
    }
}

/// Feed `wire` to a [`FrameDecoder`] in pieces of the given sizes (cycled), draining it
/// after each; frames are checked as in [`check_decode`]. Returns the frames decoded.
fn feed(wire: &[u8], pieces: &[usize], max: u32) -> Result<Vec<Frame>, TestCaseError> {
    let mut dec = FrameDecoder::new(max);
    let mut out = Vec::new();
    let mut rest = wire;
    for &n in pieces.iter().cycle() {
        if rest.is_empty() {
            break;
        }
        let (piece, tail) = rest.split_at(n.clamp(1, rest.len()));
        rest = tail;
        dec.push(piece);
        loop {
            let (r, bytes) = allocated_by(|| dec.next_frame());
            match r {
                Err(_) => return Ok(out), // the stream is unusable after an error
                Ok(None) => break,
                Ok(Some(f)) => {
                    prop_assert!(bytes <= max as usize, "{bytes} bytes allocated, bound {max}");
                    let mut enc = Vec::new();
                    f.encode(&mut enc);
                    prop_assert!(check_decode(&enc, max)?.is_some(), "a decoded frame decodes again");
                    out.push(f);
                }
            }
        }
        // Whatever is left is less than one frame the bound allows.
        prop_assert!(dec.pending() < HEADER_LEN + max as usize, "{} bytes pending", dec.pending());
    }
    Ok(out)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(5000), ..ProptestConfig::default() })]

    /// Arbitrary bytes, decoded frame after frame.
    #[test]
    fn arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..8192), max in 0u32..70_000) {
        let mut rest = &bytes[..];
        while let Some(used) = check_decode(rest, max)? {
            rest = &rest[used..];
        }
    }

    /// Arbitrary bytes behind a well-formed header of each type, so bodies are parsed.
    #[test]
    fn arbitrary_bodies(kind in 0u8..12, flags: u8, stream in prop_oneof![Just(0u32), 1u32..5, any::<u32>()],
                        body in proptest::collection::vec(any::<u8>(), 0..1100), max in 0u32..2000) {
        let mut wire = vec![kind, flags, 0, 0];
        wire.extend_from_slice(&stream.to_be_bytes());
        wire.extend_from_slice(&(body.len() as u32).to_be_bytes());
        wire.extend_from_slice(&body);
        check_decode(&wire, max)?;
    }

    /// Valid encodings, mutated, through the incremental decoder in arbitrary pieces.
    /// Unmutated, they must come back exactly.
    #[test]
    fn mutated_encodings(frames in proptest::collection::vec(arb_frame(), 1..12),
                         mutations in proptest::collection::vec(arb_mutation(), 0..4),
                         pieces in proptest::collection::vec(1usize..5000, 1..6),
                         max in prop_oneof![Just(64 * 1024u32), 0u32..4000]) {
        let mut wire = Vec::new();
        for f in &frames {
            f.encode(&mut wire);
        }
        let fits = frames.iter().all(|f| f.encoded_len() - HEADER_LEN <= max as usize);
        for m in &mutations {
            apply(&mut wire, m);
        }
        let out = feed(&wire, &pieces, max)?;
        if mutations.is_empty() && fits {
            prop_assert_eq!(out, frames);
        }
    }
}

/// The allocator measures what it should, or the bounds above prove nothing.
#[test]
fn counting_allocator_counts_this_threads_allocations() {
    let (v, bytes) = allocated_by(|| vec![0u8; 1000]);
    assert!(bytes >= 1000 && v.len() == 1000, "{bytes}");
    let (_, bytes) = allocated_by(|| std::thread::spawn(|| vec![0u8; 1 << 20]).join().unwrap().len());
    assert!(bytes < 1 << 20, "another thread's allocation is not counted: {bytes}");
}
