//! The sandbox state machine.
//!
//!   Created --start--> Ready --stop / scope gone--> NotReady
//!   Created --stop--> NotReady
//!
//! NotReady is terminal (a stopped sandbox is not restarted; kubelet makes a
//! new attempt). Remove is allowed from every state.

use serde::{Deserialize, Serialize};
use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    Created,
    Ready,
    NotReady,
}

impl State {
    pub fn as_str(self) -> &'static str {
        match self {
            State::Created => "created",
            State::Ready => "ready",
            State::NotReady => "notready",
        }
    }

    pub fn parse(s: &str) -> Option<State> {
        match s {
            "created" => Some(State::Created),
            "ready" => Some(State::Ready),
            "notready" => Some(State::NotReady),
            _ => None,
        }
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for s in [State::Created, State::Ready, State::NotReady] {
            assert_eq!(State::parse(s.as_str()), Some(s));
        }
        assert_eq!(State::parse("running"), None);
    }
}
