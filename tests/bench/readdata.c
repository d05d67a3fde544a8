/* readdata FILE...: reads the data regions of each file (SEEK_DATA/SEEK_HOLE), 1 MiB per read; prints the bytes read.
 * The baseline of the rebuild and scrub benchmarks (redundancy.sh, rebuild.sh): what a disk image holds, read as cat
 * would, without the holes of the sparse file. cat of a sparse image would flatter the baseline: reading a hole costs
 * no disk I/O, and on tmpfs it is several times faster than reading data.
 * Built by bench_build_readdata (lib.sh) with cc -O2 -Wall. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
static char buf[1 << 20];
int main(int argc, char **argv) {
  long long total = 0;
  for (int i = 1; i < argc; i++) {
    int fd = open(argv[i], O_RDONLY);
    if (fd < 0) { perror(argv[i]); return 1; }
    off_t end = lseek(fd, 0, SEEK_END), pos = 0;
    while (pos < end) {
      off_t data = lseek(fd, pos, SEEK_DATA);
      if (data < 0 && errno == ENXIO) break;
      off_t hole = data < 0 ? -1 : lseek(fd, data, SEEK_HOLE);
      if (data < 0 || hole < 0) { perror(argv[i]); return 1; }
      for (off_t o = data; o < hole;) {
        ssize_t r = pread(fd, buf, hole - o < (off_t)sizeof buf ? (size_t)(hole - o) : sizeof buf, o);
        if (r <= 0) { fprintf(stderr, "%s: read failed at %lld\n", argv[i], (long long)o); return 1; }
        o += r;
        total += r;
      }
      pos = hole;
    }
    close(fd);
  }
  printf("%lld\n", total);
  return 0;
}
