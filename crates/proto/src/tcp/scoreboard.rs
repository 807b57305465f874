//! A set of byte ranges above a moving left edge: the sender's SACK scoreboard
//! (RFC 6675 §3) and the receiver's out-of-order reassembly map (RFC 2018 §4).

/// Disjoint, sorted, non-adjacent half-open ranges `[start, end)`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RangeSet {
    ranges: Vec<(u64, u64)>,
}

impl RangeSet {
    /// Empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// The ranges, ascending.
    pub fn ranges(&self) -> &[(u64, u64)] {
        &self.ranges
    }

    /// True when no byte is in the set.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// Add `[start, end)`, merging with overlapping or adjacent ranges. Returns the
    /// merged range that now contains it.
    pub fn insert(&mut self, start: u64, end: u64) -> (u64, u64) {
        if start >= end {
            return (start, end);
        }
        // First range whose end reaches `start` (could merge) …
        let i = self.ranges.partition_point(|&(_, e)| e < start);
        // … up to the first range starting after `end`.
        let j = self.ranges.partition_point(|&(s, _)| s <= end);
        let (mut s, mut e) = (start, end);
        if i < j {
            s = s.min(self.ranges[i].0);
            e = e.max(self.ranges[j - 1].1);
        }
        self.ranges.splice(i..j, std::iter::once((s, e)));
        (s, e)
    }

    /// Drop everything below `edge` (the cumulative ACK / rcv_nxt moved).
    pub fn advance(&mut self, edge: u64) {
        let k = self.ranges.partition_point(|&(_, e)| e <= edge);
        self.ranges.drain(..k);
        if let Some(first) = self.ranges.first_mut() {
            first.0 = first.0.max(edge);
        }
    }

    /// Is byte `b` in the set?
    pub fn contains(&self, b: u64) -> bool {
        let i = self.ranges.partition_point(|&(_, e)| e <= b);
        self.ranges.get(i).is_some_and(|&(s, _)| s <= b)
    }

    /// The range containing `b`, if any.
    pub fn range_at(&self, b: u64) -> Option<(u64, u64)> {
        let i = self.ranges.partition_point(|&(_, e)| e <= b);
        self.ranges.get(i).copied().filter(|&(s, _)| s <= b)
    }

    /// Bytes of the set inside `[a, b)`.
    pub fn bytes_in(&self, a: u64, b: u64) -> u64 {
        if a >= b {
            return 0;
        }
        let i = self.ranges.partition_point(|&(_, e)| e <= a);
        self.ranges[i..].iter().take_while(|&&(s, _)| s < b).map(|&(s, e)| e.min(b) - s.max(a)).sum()
    }

    /// Total bytes in the set.
    pub fn total_bytes(&self) -> u64 {
        self.ranges.iter().map(|&(s, e)| e - s).sum()
    }

    /// Highest byte + 1, or `None` when empty.
    pub fn max_end(&self) -> Option<u64> {
        self.ranges.last().map(|&(_, e)| e)
    }

    /// The first byte ≥ `b` that is *not* in the set.
    pub fn next_gap(&self, b: u64) -> u64 {
        match self.range_at(b) {
            Some((_, e)) => e,
            None => b,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn merges_and_advances() {
        let mut r = RangeSet::new();
        r.insert(10, 20);
        r.insert(30, 40);
        assert_eq!(r.insert(20, 30), (10, 40));
        assert_eq!(r.ranges(), &[(10, 40)]);
        r.insert(50, 60);
        r.advance(35);
        assert_eq!(r.ranges(), &[(35, 40), (50, 60)]);
        assert_eq!(r.bytes_in(0, 55), 10);
        assert!(r.contains(50) && !r.contains(60) && !r.contains(45));
        assert_eq!(r.next_gap(36), 40);
        assert_eq!(r.next_gap(45), 45);
    }

    proptest! {
        #[test]
        fn matches_a_bitmap(ops in proptest::collection::vec((0u64..200, 0u64..30), 0..60), edge in 0u64..230) {
            let mut r = RangeSet::new();
            let mut bits = [false; 230];
            for (s, l) in ops {
                r.insert(s, s + l);
                for b in s..s + l { bits[b as usize] = true; }
            }
            r.advance(edge);
            bits[..edge as usize].fill(false);
            for (b, &bit) in bits.iter().enumerate() {
                prop_assert_eq!(r.contains(b as u64), bit);
            }
            prop_assert_eq!(r.total_bytes(), bits.iter().filter(|&&x| x).count() as u64);
            for w in r.ranges().windows(2) { prop_assert!(w[0].1 < w[1].0); }
        }
    }
}
