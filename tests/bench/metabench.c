/* metabench mkdirs|create|stat|unlink DIR N NDIRS SIZE: file i is DIR/dNNN/fNNNNNN with NNN = i % NDIRS.
 * Metadata throughput of run.sh and policy.sh, built by bench_build_tool (lib.sh).
 * mkdirs makes the NDIRS dirs; create makes each file (O_EXCL), writes SIZE bytes and closes it; stat checks that
 * each file has SIZE bytes; unlink removes them. Prints ops/s (mkdirs: dirs/s). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
int main(int argc, char **argv) {
  if (argc != 6) { fprintf(stderr, "usage: metabench mkdirs|create|stat|unlink DIR N NDIRS SIZE\n"); return 2; }
  const char *mode = argv[1], *dir = argv[2];
  long n = atol(argv[3]), ndirs = atol(argv[4]), size = atol(argv[5]);
  if (n <= 0 || ndirs <= 0 || size < 0 || size > 65536) { fprintf(stderr, "metabench: bad numbers\n"); return 2; }
  char path[4096], buf[65536];
  for (long k = 0; k < size; k++) buf[k] = (char)('a' + k % 26);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  if (!strcmp(mode, "mkdirs")) {
    for (long d = 0; d < ndirs; d++) {
      snprintf(path, sizeof path, "%s/d%03ld", dir, d);
      if (mkdir(path, 0755) != 0) { perror(path); return 1; }
    }
    n = ndirs;
  } else {
    for (long i = 0; i < n; i++) {
      snprintf(path, sizeof path, "%s/d%03ld/f%06ld", dir, i % ndirs, i);
      if (!strcmp(mode, "create")) {
        int fd = open(path, O_CREAT | O_EXCL | O_WRONLY, 0644);
        if (fd < 0) { perror(path); return 1; }
        if (write(fd, buf, (size_t)size) != (ssize_t)size) { perror(path); return 1; }
        if (close(fd) != 0) { perror(path); return 1; }
      } else if (!strcmp(mode, "stat")) {
        struct stat st;
        if (stat(path, &st) != 0) {
          perror(path);
          /* which component is missing? */
          char sub[4096];
          snprintf(sub, sizeof sub, "%s/d%03ld", dir, i % ndirs);
          fprintf(stderr, "metabench: file %ld of %ld; %s %s, %s %s\n", i, n, dir,
                  stat(dir, &st) == 0 ? "exists" : "is missing", sub, stat(sub, &st) == 0 ? "exists" : "is missing");
          return 1;
        }
        if (st.st_size != size) { fprintf(stderr, "%s: size %lld, expected %ld\n", path, (long long)st.st_size, size); return 1; }
      } else if (!strcmp(mode, "unlink")) {
        if (unlink(path) != 0) { perror(path); return 1; }
      } else { fprintf(stderr, "bad mode %s\n", mode); return 2; }
    }
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double s = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
  printf("%.1f\n", n / s);
  return 0;
}
