//! Quantile tables without a full sort.
//!
//! The model needs two 100-point CDF tables per trace and the analysis a
//! handful of percentiles.  Sorting 30 000 values costs more than the FFT;
//! selecting the cut points by recursive partitioning (`select_nth_unstable`
//! on ever smaller slices) is linear-ish and exact.

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
    }
}
