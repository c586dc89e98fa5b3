//! What FAC² noticed, each thing said once, in the order it was noticed.
//!
//! A note is keyed by its [`Topic`]; a second note on the same topic is
//! dropped, so a run that meets the same condition on every train says it
//! once, with the first train's figures.

/// What a note is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Topic {
    /// The receiver bunches arrivals (interrupt coalescing).
    Bunching,
    /// A train arrived faster than it was sent.
    FastArrival,
    /// The send stamps gave no rate.
    NoSendRate,
    /// Trains lost more than the fit tolerates.
    Lossy,
    /// The queue budget shortened near trains.
    QueueBudget,
    /// A near train overflowed the queue: the budget was halved.
    QueueShrunk,
    /// The byte budget or the train cap ended the run.
    Budget,
    /// A point was set aside as an outlier (per train).
    Outlier(u32),
    /// The fit contradicts what carried or slowed trains show.
    Contradiction,
    /// No fit: A was read from the trains' bracket.
    Bracket,
    /// The answer is only a lower bound.
    LowerBound,
    /// The trains could not resolve C: it is not reported.
    CapacityUnresolved,
    /// The fit's line is not usable.
    BadFit,
    /// A train delivered too little to measure; the rate was lowered.
    Retry,
    /// A train arrived in too few bunches; the rate was lowered.
    BunchedRetry,
    /// Trains in a row delivered too little: FAC² gave up.
    NoMeasurement,
}

#[derive(Debug, Clone, Default)]
pub(crate) struct Notes {
    said: Vec<(Topic, String)>,
}

impl Notes {
    /// Says `text` unless something was said on `topic` already; whether
    /// it was said.
    pub fn once(&mut self, topic: Topic, text: impl Into<String>) -> bool {
        if self.said.iter().any(|(t, _)| *t == topic) {
            return false;
        }
        self.said.push((topic, text.into()));
        true
    }

    pub fn texts(&self) -> impl Iterator<Item = &str> {
        self.said.iter().map(|(_, s)| s.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_topic_is_said_once_in_order() {
        let mut n = Notes::default();
        assert!(n.once(Topic::Lossy, "a"));
        assert!(!n.once(Topic::Lossy, "b"));
        assert!(n.once(Topic::Outlier(3), "c"));
        assert!(n.once(Topic::Outlier(4), "d"));
        assert_eq!(n.texts().collect::<Vec<_>>(), ["a", "c", "d"]);
    }
}
