// membw.c — seam-membw: the memory-bandwidth limit that decode is measured
// against (the probes of src/cpu/membw.h), on 1 thread and on THREADS.
//
//   seam-membw [-t THREADS] [-s GIB] [-r REPS]
//
// Each probe runs REPS times after one warm-up; the median and the best are
// printed. Decode's target is a fraction of the better read median.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/common.h"
#include "cpu/membw.h"
#include "cpu/pool.h"

int main(int argc, char **argv) {
    int threads = (int)sysconf(_SC_NPROCESSORS_ONLN), reps = 9;
    double gib = 1.0;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(argv[i], "-t") && v)
            threads = atoi(v), i++;
        else if (!strcmp(argv[i], "-s") && v)
            gib = atof(v), i++;
        else if (!strcmp(argv[i], "-r") && v)
            reps = atoi(v), i++;
        else {
            fprintf(stderr, "usage: seam-membw [-t THREADS] [-s GIB] [-r REPS]\n");
            return 2;
        }
    }
    if (threads < 1 || threads > 256 || reps < 1 || reps > 64 || !(gib > 0)) {
        fprintf(stderr, "seam-membw: want 1 <= -t <= 256, 1 <= -r <= 64, -s > 0\n");
        return 2;
    }
    printf("seam-membw: read %.2f GiB, triad 3 x %.2f GiB, %d reps, median and best\n", gib, gib / 2, reps);
    const int counts[2] = {1, threads};
    for (int k = 0; k < (threads > 1 ? 2 : 1); k++) {
        seam_error err = {{0}};
        seam_pool *pool = pool_create(counts[k], &err);
        membw_result r;
        if (!pool || membw_measure(pool, (size_t)(gib * (1 << 30)), reps, &r, &err)) {
            fprintf(stderr, "seam-membw: %s\n", err.msg);
            return 1;
        }
        for (int p = 0; p < MEMBW_PROBES; p++)
            printf("  %-7s %2d thread%s  median %6.1f GB/s  best %6.1f GB/s\n", membw_probe_name[p], counts[k],
                   counts[k] == 1 ? " " : "s", r.median[p], r.best[p]);
        pool_destroy(pool);
    }
    return 0;
}
