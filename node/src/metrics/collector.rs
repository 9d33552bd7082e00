//! Prometheus collector (being written).
