// bench.h — `seam bench`: prompt processing and generation speed in the
// manner of llama-bench, with the bandwidth decode reaches.
#ifndef SEAM_BENCH_H
#define SEAM_BENCH_H

// argv: the options after `seam bench`. Returns the process exit status.
int cmd_bench(int argc, char **argv);

#endif
