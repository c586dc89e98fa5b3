//! What a method's lab estimates must be to pass a test, and the proof that
//! this bar catches a cheat: a method that returns the capacity, twice the
//! answer, a constant, or nothing fails it (issue 15).  The lab tests judge
//! every load they measure with [`judge`], blind (no `--known-capacity`).
#![allow(dead_code)]

/// One lab run: what the method said and what was true over its window.
#[derive(Debug, Clone, Copy)]
pub struct Case {
    pub estimate: Option<f64>,
    pub truth: f64,
}

/// The median relative error of `cases`, if every case has a positive,
/// finite estimate and that median is at most `bound`; else why not.
pub fn judge(cases: &[Case], bound: f64) -> Result<f64, String> {
    if cases.is_empty() {
        return Err("no run to judge".into());
    }
    let mut errs = Vec::new();
    for (i, c) in cases.iter().enumerate() {
        let Some(e) = c.estimate.filter(|e| e.is_finite() && *e > 0.0) else {
            return Err(format!(
                "run {i} gave no usable estimate ({:?})",
                c.estimate
            ));
        };
        errs.push((e / c.truth - 1.0).abs());
    }
    errs.sort_by(f64::total_cmp);
    let m = errs.len() / 2;
    let median = if errs.len() % 2 == 1 {
        errs[m]
    } else {
        (errs[m - 1] + errs[m]) / 2.0
    };
    if median <= bound {
        Ok(median)
    } else {
        Err(format!(
            "median |error| {:.1} % above {:.0} % (errors {errs:?})",
            median * 100.0,
            bound * 100.0
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lab test's two loads on its 100 Mb/s path (IP layer): A at 30 %
    /// and 70 % Poisson cross traffic, and C.
    const LOADS: [f64; 2] = [69.4e6, 29.7e6];
    const C: f64 = 99.1e6;
    const BOUND: f64 = 0.2;

    fn passes_every_load(answer: impl Fn(f64) -> Option<f64>) -> bool {
        LOADS.iter().all(|&truth| {
            let cases: Vec<Case> = (0..3)
                .map(|_| Case {
                    estimate: answer(truth),
                    truth,
                })
                .collect();
            judge(&cases, BOUND).is_ok()
        })
    }

    #[test]
    fn an_honest_method_passes_and_every_cheat_fails() {
        assert!(passes_every_load(|a| Some(a * 1.05)));
        assert!(passes_every_load(|a| Some(a * 0.9)));
        assert!(!passes_every_load(|_| Some(C)), "the capacity");
        assert!(!passes_every_load(|a| Some(2.0 * a)), "twice the answer");
        assert!(!passes_every_load(|_| None), "nothing");
        assert!(!passes_every_load(|_| Some(0.0)), "zero");
        // No constant at all is within the bound at both loads.
        for k in 1..=200 {
            let x = f64::from(k) * 1e6;
            assert!(!passes_every_load(|_| Some(x)), "the constant {x}");
        }
    }
}
