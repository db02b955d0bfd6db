/*
 * rankopt PMPI shim, hand-written core: the order file, the reordered
 * communicator, and the helpers the generated wrappers call.
 *
 * RANKOPT_ORDER=path names a text file with the order, integers separated
 * by white space (one per line as written by `rankopt solve --order-out`),
 * `#` starting a comment: entry k is the original MPI_COMM_WORLD rank of
 * the process that gets new rank k. Rank 0 reads and validates it and
 * broadcasts the verdict, so a bad file stops every rank before the
 * program's first line after MPI_Init, with one message from rank 0.
 * RANKOPT_SHIM_VERBOSE=1 makes rank 0 say what the shim did.
 * RANKOPT_PROFILE=folder records the collective calls (shim_profile.c).
 * RANKOPT_SHIM_CONFIRM=folder: every rank leaves an empty file rank.R there
 * once the shim is loaded and MPI is up, so `rankopt run-mpi` can tell a
 * shim the dynamic loader ignored from one that ran.
 *
 * The file must be a regular file: it is opened with O_NONBLOCK and
 * checked with fstat before the first read, so a FIFO (or a device such
 * as /dev/zero) is refused with a message instead of blocking MPI_Init.
 */
#include "rankopt_shim.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define RANKOPT_TOKEN_MAX 64

RANKOPT_HIDDEN MPI_Comm rankopt_world = MPI_COMM_NULL;

typedef struct {
    char *text;
    size_t len;
} rankopt_msg;

static int fail(rankopt_msg *msg, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg->text, msg->len, fmt, ap);
    va_end(ap);
    return 1;
}

/* Next white-space separated token of `f` into `tok`, skipping comments.
 * Returns its length (truncated tokens keep RANKOPT_TOKEN_MAX - 1
 * characters and report RANKOPT_TOKEN_MAX), 0 at end of file. */
static size_t next_token(FILE *f, char *tok)
{
    int c;
    size_t n = 0;
    for (;;) {
        c = fgetc(f);
        if (c == '#') {
            while (c != EOF && c != '\n') c = fgetc(f);
        }
        if (c == EOF) return 0;
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r' && c != '\v' && c != '\f') break;
    }
    while (c != EOF && c != '#' && c != ' ' && c != '\t' && c != '\n' && c != '\r' && c != '\v'
           && c != '\f') {
        if (n < RANKOPT_TOKEN_MAX - 1) tok[n] = (char)c;
        n++;
        c = fgetc(f);
    }
    if (c == '#') ungetc(c, f);
    tok[n < RANKOPT_TOKEN_MAX - 1 ? n : RANKOPT_TOKEN_MAX - 1] = '\0';
    return n < RANKOPT_TOKEN_MAX ? n : RANKOPT_TOKEN_MAX;
}

static const char *file_kind(mode_t mode)
{
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISFIFO(mode)) return "a FIFO";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISSOCK(mode)) return "a socket";
    return "not a regular file";
}

/* Open `path` for reading if it is a regular file, without blocking on a
 * FIFO. Returns the stream, or NULL with a message in `msg`. */
static FILE *open_regular(const char *path, rankopt_msg *msg)
{
    struct stat st;
    int flags;
    FILE *f;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) {
        fail(msg, "cannot read RANKOPT_ORDER file '%s': %s", path, strerror(errno));
        return NULL;
    }
    if (fstat(fd, &st) != 0) {
        fail(msg, "cannot read RANKOPT_ORDER file '%s': %s", path, strerror(errno));
        close(fd);
        return NULL;
    }
    if (!S_ISREG(st.st_mode)) {
        fail(msg, "RANKOPT_ORDER file '%s' is %s, not a regular file", path, file_kind(st.st_mode));
        close(fd);
        return NULL;
    }
    flags = fcntl(fd, F_GETFL);
    if (flags == -1 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) == -1
        || (f = fdopen(fd, "r")) == NULL) {
        fail(msg, "cannot read RANKOPT_ORDER file '%s': %s", path, strerror(errno));
        close(fd);
        return NULL;
    }
    return f;
}

/* Read and validate the order file for a world of `size` ranks into
 * `order` (`size` entries). Returns 0, or 1 with a message in `msg`. */
static int read_order(const char *path, int size, int *order, rankopt_msg *msg)
{
    char tok[RANKOPT_TOKEN_MAX];
    int count = 0, status = 0;
    int *entry_of = NULL;
    FILE *f = open_regular(path, msg);
    if (f == NULL) return 1;
    while (next_token(f, tok) > 0) {
        char *end;
        long value;
        errno = 0;
        value = strtol(tok, &end, 10);
        if (*end != '\0' || end == tok || errno != 0 || value < INT_MIN || value > INT_MAX) {
            status = fail(msg, "RANKOPT_ORDER file '%s': entry %d is '%s', expected an integer rank",
                          path, count, tok);
            goto done;
        }
        if (count < size) order[count] = (int)value;
        if (count == INT_MAX) break;
        count++;
    }
    if (ferror(f)) {
        status = fail(msg, "cannot read RANKOPT_ORDER file '%s': read error", path);
        goto done;
    }
    if (count != size) {
        status = fail(msg, "RANKOPT_ORDER file '%s' has %d entries, but MPI_COMM_WORLD has %d ranks",
                      path, count, size);
        goto done;
    }
    entry_of = malloc((size_t)size * sizeof(int));
    if (entry_of == NULL) {
        status = fail(msg, "out of memory reading RANKOPT_ORDER file '%s'", path);
        goto done;
    }
    for (int i = 0; i < size; i++) entry_of[i] = -1;
    for (int k = 0; k < size; k++) {
        int r = order[k];
        if (r < 0 || r >= size) {
            status = fail(msg,
                          "RANKOPT_ORDER file '%s': entry %d is %d, expected a rank in 0..%d "
                          "(MPI_COMM_WORLD has %d ranks)",
                          path, k, r, size - 1, size);
            goto done;
        }
        if (entry_of[r] >= 0) {
            status = fail(msg,
                          "RANKOPT_ORDER file '%s': rank %d appears twice (entries %d and %d); "
                          "the order must be a permutation of 0..%d",
                          path, r, entry_of[r], k, size - 1);
            goto done;
        }
        entry_of[r] = k;
    }
done:
    free(entry_of);
    fclose(f);
    return status;
}

static int env_flag(const char *name)
{
    const char *v = getenv(name);
    return v != NULL && *v != '\0' && strcmp(v, "0") != 0;
}

/* Leave rank.R in $RANKOPT_SHIM_CONFIRM: this rank runs under the shim. */
static void confirm_loaded(int rank)
{
    const char *dir = getenv("RANKOPT_SHIM_CONFIRM");
    char path[4096];
    int fd;

    if (dir == NULL || *dir == '\0') return;
    if (snprintf(path, sizeof path, "%s/rank.%d", dir, rank) >= (int)sizeof path) return;
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd >= 0) close(fd);
}

void rankopt_after_init(void)
{
    const char *path = getenv("RANKOPT_ORDER");
    int verbose = env_flag("RANKOPT_SHIM_VERBOSE");
    int rank, size, status = 0, key = -1;
    int *order;
    char text[1024] = "";
    rankopt_msg msg = {text, sizeof text};
    MPI_Comm comm;

    rankopt_profile_init();
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &size);
    confirm_loaded(rank);
    if (path == NULL || *path == '\0') {
        if (verbose && rank == 0) {
            fprintf(stderr, "rankopt shim: RANKOPT_ORDER is not set; MPI_COMM_WORLD is unchanged\n");
            fflush(stderr);
        }
        return;
    }
    order = malloc((size_t)size * sizeof(int));
    if (rank == 0) {
        status = order == NULL ? fail(&msg, "out of memory for an order of %d ranks", size)
                               : read_order(path, size, order, &msg);
    }
    else if (order == NULL) {
        status = 1;
    }
    PMPI_Allreduce(MPI_IN_PLACE, &status, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (status != 0) {
        if (rank == 0) {
            fprintf(stderr, "rankopt shim: %s\n", text[0] ? text : "out of memory on some rank");
            fflush(stderr);
        }
        free(order);
        PMPI_Finalize();
        exit(1);
    }
    PMPI_Bcast(order, size, MPI_INT, 0, MPI_COMM_WORLD);
    for (int k = 0; k < size; k++) {
        if (order[k] == rank) key = k;
    }
    free(order);
    PMPI_Comm_split(MPI_COMM_WORLD, 0, key, &comm);
    PMPI_Comm_set_name(comm, "MPI_COMM_WORLD (rankopt)");
    rankopt_world = comm;
    if (verbose && rank == 0) {
        fprintf(stderr, "rankopt shim: MPI_COMM_WORLD reordered by '%s' (%d ranks)\n", path, size);
        fflush(stderr);
    }
}

void rankopt_before_finalize(void)
{
    rankopt_profile_write();
    if (rankopt_world != MPI_COMM_NULL) {
        MPI_Comm comm = rankopt_world;
        rankopt_world = MPI_COMM_NULL;
        PMPI_Comm_free(&comm);
    }
}

int rankopt_is_predefined_keyval(int keyval)
{
    return keyval == MPI_TAG_UB || keyval == MPI_HOST || keyval == MPI_IO
           || keyval == MPI_WTIME_IS_GLOBAL || keyval == MPI_APPNUM || keyval == MPI_UNIVERSE_SIZE
           || keyval == MPI_LASTUSEDCODE;
}
