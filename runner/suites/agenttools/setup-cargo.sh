#!/bin/sh
# agent-tools setup of T6 (untimed, in the empty base directory): crate/, a
# Cargo library crate "t6" with no dependencies and 64 modules, m01..m64.rs,
# each a struct with a derived Debug, Clone and Eq, a constructor and a
# checksum; lib.rs
# declares them and sums their values. Deterministic: the verifier's
# digests depend on it.
set -eu
mkdir -p crate/src
cat >crate/Cargo.toml <<'TOML'
[package]
name = "t6"
version = "0.1.0"
edition = "2021"

[dependencies]
TOML
i=1
while [ "$i" -le 64 ]; do
	n=$(printf '%02d' "$i")
	cat >"crate/src/m$n.rs" <<RS
//! Module $n of 64.

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record$n {
    pub id: u64,
    pub values: Vec<u32>,
}

impl Record$n {
    pub fn new(id: u64) -> Self {
        let values = (0..($i + 8u32)).map(|v| v.wrapping_mul(2654435761).rotate_left($i % 31)).collect();
        Record$n { id, values }
    }

    pub fn checksum(&self) -> u64 {
        self.values.iter().fold(self.id, |a, v| a.wrapping_mul(31).wrapping_add(*v as u64))
    }
}

pub fn value() -> u64 {
    Record$n::new($i).checksum() % 1_000_003
}
RS
	i=$((i + 1))
done
{
	i=1
	while [ "$i" -le 64 ]; do
		printf 'pub mod m%02d;\n' "$i"
		i=$((i + 1))
	done
	printf '\n/// The sum of the 64 modules'"'"' values.\npub fn total() -> u64 {\n    0'
	i=1
	while [ "$i" -le 64 ]; do
		printf ' + m%02d::value()' "$i"
		i=$((i + 1))
	done
	printf '\n}\n'
} >crate/src/lib.rs
