#!/bin/sh
# agent-tools setup of T1 and T5 (untimed, in the empty base directory):
# 2,048 files of 1,024 bytes in 32 directories, d01/f01..d32/f64, each 16
# lines of 64 bytes. Every seventh file (n = 64*(d-1)+f, n % 7 == 0)
# holds "needle" on line 5: 292 files. Shell builtins only, so that it is
# the same bytes wherever it runs.
set -eu
d=1
while [ "$d" -le 32 ]; do
	dn=$((100 + d))
	dn=${dn#1}
	mkdir "d$dn"
	f=1
	while [ "$f" -le 64 ]; do
		fn=$((100 + f))
		fn=${fn#1}
		n=$((64 * (d - 1) + f))
		{
			k=1
			while [ "$k" -le 16 ]; do
				kn=$((100 + k))
				kn=${kn#1}
				if [ "$k" -eq 5 ] && [ $((n % 7)) -eq 0 ]; then
					printf '%-63s\n' "d$dn/f$fn line $kn needle"
				else
					printf '%-63s\n' "d$dn/f$fn line $kn"
				fi
				k=$((k + 1))
			done
		} >"d$dn/f$fn"
		f=$((f + 1))
	done
	d=$((d + 1))
done
