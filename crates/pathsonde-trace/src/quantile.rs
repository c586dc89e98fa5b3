//! Quantile tables without a full sort.
//!
//! The model needs two 100-point CDF tables per trace.  Sorting 30 000
//! values costs far more than the FFT, and even selecting the 100 cut points
//! by recursive partitioning costs ~7 passes over the data.
//! [`quantiles`] does it in three linear passes, exactly: bucket every value
//! by its place between min and max, find from the bucket counts which
//! bucket holds each wanted rank, then select within only those buckets.

/// The values at ranks `round(p · (n−1))` for each `p` in `probs`
/// (ascending, in [0, 1]), found in place in `data` (reordered).
pub fn quantiles_in_place(data: &mut [f64], probs: &[f64]) -> Vec<f64> {
    let n = data.len();
    if n == 0 {
        return vec![f64::NAN; probs.len()];
    }
    let ranks: Vec<usize> = probs
        .iter()
        .map(|p| ((p.clamp(0.0, 1.0) * (n - 1) as f64).round() as usize).min(n - 1))
        .collect();
    select_ranks(data, 0, &ranks);
    ranks.iter().map(|&r| data[r]).collect()
}

/// Places the elements of the (sorted) absolute `ranks` at their sorted
/// positions in `data`, whose first element has absolute rank `base`.
fn select_ranks(data: &mut [f64], base: usize, ranks: &[usize]) {
    if ranks.is_empty() || data.is_empty() {
        return;
    }
    let mid = ranks.len() / 2;
    let k = ranks[mid] - base;
    data.select_nth_unstable_by(k, f64::total_cmp);
    let (left, rest) = data.split_at_mut(k);
    let right = &mut rest[1..];
    // Ranks equal to k are already in place.
    let lo: Vec<usize> = ranks[..mid]
        .iter()
        .copied()
        .filter(|&r| r < base + k)
        .collect();
    let hi: Vec<usize> = ranks[mid + 1..]
        .iter()
        .copied()
        .filter(|&r| r > base + k)
        .collect();
    select_ranks(left, base, &lo);
    select_ranks(right, base + k + 1, &hi);
}

/// Buckets of the counting pass.
const BUCKETS: usize = 8192;

/// The values at ranks `round(p · (n−1))` for each `p` in `probs`
/// (ascending, in [0, 1]); `data` must be finite.  Same result as
/// [`quantiles_in_place`], without reordering `data`.
pub fn quantiles(data: &[f64], probs: &[f64]) -> Vec<f64> {
    let n = data.len();
    if n < 4 * BUCKETS / 64 {
        return quantiles_in_place(&mut data.to_vec(), probs);
    }
    // Min and max in four lanes (plain comparisons vectorise; f64::min's
    // NaN rules do not — the data are finite).
    let mut lo4 = [f64::INFINITY; 4];
    let mut hi4 = [f64::NEG_INFINITY; 4];
    let chunks = data.chunks_exact(4);
    let tail = chunks.remainder();
    for c in chunks {
        for i in 0..4 {
            lo4[i] = if c[i] < lo4[i] { c[i] } else { lo4[i] };
            hi4[i] = if c[i] > hi4[i] { c[i] } else { hi4[i] };
        }
    }
    let mut lo = lo4.iter().copied().fold(f64::INFINITY, f64::min);
    let mut hi = hi4.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    for &v in tail {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if !(lo.is_finite() && hi.is_finite()) || hi <= lo {
        return quantiles_in_place(&mut data.to_vec(), probs);
    }
    let scale = (BUCKETS as f64 - 1.0) / (hi - lo);
    // Each value's bucket, kept for the gather pass.
    let buckets: Vec<u16> = data
        .iter()
        .map(|&v| (((v - lo) * scale) as u32).min(BUCKETS as u32 - 1) as u16)
        .collect();
    let mut count = vec![0u32; BUCKETS];
    for &b in &buckets {
        count[usize::from(b)] += 1;
    }
    // First rank held by each bucket.
    let mut first = vec![0usize; BUCKETS + 1];
    for b in 0..BUCKETS {
        first[b + 1] = first[b] + count[b] as usize;
    }
    let ranks: Vec<usize> = probs
        .iter()
        .map(|p| ((p.clamp(0.0, 1.0) * (n - 1) as f64).round() as usize).min(n - 1))
        .collect();
    // Which bucket each rank falls in, and which buckets are needed.
    let mut needed = vec![u32::MAX; BUCKETS];
    let mut slots: Vec<(usize, usize)> = Vec::new(); // (bucket, offset in its gather)
    let mut where_: Vec<(usize, usize)> = Vec::with_capacity(ranks.len());
    let mut b = 0usize;
    for &r in &ranks {
        while first[b + 1] <= r {
            b += 1;
        }
        if needed[b] == u32::MAX {
            needed[b] = slots.len() as u32;
            slots.push((b, 0));
        }
        where_.push((needed[b] as usize, r - first[b]));
    }
    // Gather the needed buckets' values, then select within each.
    let mut offsets = Vec::with_capacity(slots.len() + 1);
    let mut total = 0usize;
    for s in &mut slots {
        s.1 = total;
        offsets.push(total);
        total += count[s.0] as usize;
    }
    offsets.push(total);
    let mut fill = offsets.clone();
    let mut gathered = vec![0.0f64; total];
    for (&v, &b) in data.iter().zip(&buckets) {
        let s = needed[usize::from(b)];
        if s != u32::MAX {
            let s = s as usize;
            gathered[fill[s]] = v;
            fill[s] += 1;
        }
    }
    // Each needed bucket once, with all its ranks (a heavy bucket — many
    // equal latencies — is partitioned once, not once per rank).
    let mut local: Vec<Vec<usize>> = vec![Vec::new(); slots.len()];
    for &(s, k) in &where_ {
        local[s].push(k);
    }
    for (s, ranks) in local.iter_mut().enumerate() {
        ranks.dedup();
        let part = &mut gathered[offsets[s]..offsets[s + 1]];
        select_ranks(part, 0, ranks);
    }
    where_
        .iter()
        .map(|&(s, k)| gathered[offsets[s] + k])
        .collect()
}

/// `count` evenly spaced probabilities from 0 to 1 inclusive.
pub fn grid(count: usize) -> Vec<f64> {
    if count < 2 {
        return vec![0.5; count];
    }
    (0..count).map(|i| i as f64 / (count - 1) as f64).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn matches_a_full_sort(mut v in proptest::collection::vec(-1e6f64..1e6, 1..500), k in 2usize..120) {
            let probs = grid(k);
            let mut sorted = v.clone();
            sorted.sort_by(f64::total_cmp);
            let q = quantiles_in_place(&mut v, &probs);
            for (p, got) in probs.iter().zip(q) {
                let r = (p * (sorted.len() - 1) as f64).round() as usize;
                prop_assert_eq!(got, sorted[r]);
            }
        }

        #[test]
        fn bucketed_matches_a_full_sort(
            v in proptest::collection::vec(-1e3f64..1e3, 1..3000),
            ties in 0usize..4,
            k in 2usize..120,
        ) {
            // Coarse values make heavy ties, as banded latencies do.
            let v: Vec<f64> = v.iter().map(|x| if ties > 0 { (x / ties as f64).round() } else { *x }).collect();
            let probs = grid(k);
            let mut sorted = v.clone();
            sorted.sort_by(f64::total_cmp);
            let q = quantiles(&v, &probs);
            for (p, got) in probs.iter().zip(q) {
                let r = (p * (sorted.len() - 1) as f64).round() as usize;
                prop_assert_eq!(got, sorted[r]);
            }
        }
    }
}
