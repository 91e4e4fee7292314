//! Readings of a thermometer, kept in order, with their mean.

use std::fmt;

/// A reading in tenths of a degree.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reading(pub i32);

pub struct Log {
    readings: Vec<Reading>,
}

impl Log {
    pub fn new() -> Self {
        Log { readings: Vec::new() }
    }

    pub fn push(&mut self, reading: Reading) {
        self.readings.push(reading);
    }

    pub fn mean(&self) -> Option<f64> {
        if self.readings.is_empty() {
            return None;
        }
        let total: i64 = self.readings.iter().map(|r| r.0 as i64).sum();
        Some(total as f64 / self.readings.len() as f64 / 10.0)
    }
}

impl fmt::Display for Reading {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{}.{} degrees", self.0 / 10, (self.0 % 10).abs())
    }
}
