/* Replay driver for a fuzz target: runs it over files named on the command line, then
 * over a seeded corpus: random byte strings of many lengths and random mutations (byte
 * flips, truncations, extensions) of the target's valid seed input. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"

static uint64_t rng(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

int main(int argc, char **argv)
{
	enum { CAP = 1 << 16 };
	static uint8_t seed[CAP], buf[CAP];
	for (int i = 1; i < argc; i++) {
		FILE *f = fopen(argv[i], "rb");
		if (!f) {
			perror(argv[i]);
			return 1;
		}
		size_t n = fread(buf, 1, CAP, f);
		fclose(f);
		fuzz_one(buf, n);
	}
	size_t ns = fuzz_seed(seed, CAP);
	uint64_t s = 0x5eed;
	int runs = getenv("FUZZ_RUNS") ? atoi(getenv("FUZZ_RUNS")) : 20000;
	for (int r = 0; r < runs; r++) {
		size_t n;
		if (r % 2 == 0 || !ns) { /* noise */
			n = rng(&s) % (r % 16 == 0 ? CAP : 256);
			for (size_t i = 0; i < n; i++)
				buf[i] = (uint8_t)rng(&s);
		} else { /* a mutated valid input */
			n = ns;
			memcpy(buf, seed, ns);
			int edits = 1 + (int)(rng(&s) % 4);
			for (int e = 0; e < edits; e++) {
				switch (rng(&s) % 4) {
				case 0: case 1: buf[rng(&s) % n] ^= (uint8_t)(1u << (rng(&s) % 8)); break;
				case 2: n = rng(&s) % (n + 1); break;
				default:
					if (n < CAP)
						buf[n++] = (uint8_t)rng(&s);
				}
				if (!n)
					break;
			}
		}
		fuzz_one(buf, n);
	}
	printf("fuzz replay: %d inputs, no failure\n", runs + argc - 1);
	return 0;
}
