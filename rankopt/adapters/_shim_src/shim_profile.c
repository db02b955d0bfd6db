/*
 * rankopt PMPI shim, collective recorder (`rankopt profile`).
 *
 * RANKOPT_PROFILE=folder turns it on: every recorded collective call
 * (the wrappers generated for the table's `record` list call
 * rankopt_record) adds one to the count of its (collective, bytes,
 * communicator size) class, and blocking calls add their time. Before
 * MPI_Finalize each process writes `folder/mpi-rank-<R>.tsv` (R: its
 * MPI_COMM_WORLD rank as launched), one line per class:
 *
 *     # rankopt profile 1 source=mpi world_rank=R world_size=P
 *     # library <first line of MPI_Get_library_version>
 *     collective <TAB> nbytes <TAB> comm_size <TAB> count <TAB> seconds
 *     p2p <TAB> src <TAB> dst <TAB> bytes <TAB> messages
 *
 * (the `p2p` lines: the point-to-point traffic, shim_traffic.c).
 * `nbytes` follows rankopt's size convention (allreduce: the vector;
 * allgather: the gathered output; reduce_scatter: the input vector;
 * alltoall: each rank's whole send buffer; broadcast/reduce: the
 * message). The Python side (rankopt.adapters.profile) merges the files.
 *
 * Recording costs one type-size query, one communicator-size query and one
 * hash-table update per call; calls made before MPI_Init or after
 * MPI_Finalize are not recorded.
 */
#include "rankopt_shim.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

RANKOPT_HIDDEN int rankopt_recording = 0;

typedef struct {
    const char *kind; /* NULL: empty slot */
    long long nbytes;
    int comm_size;
    long long count;
    double seconds;
} rankopt_class;

static rankopt_class *table = NULL;
static size_t capacity = 0, used = 0;
static char *folder = NULL;

static size_t slot_of(rankopt_class *tab, size_t cap, const char *kind, long long nbytes,
                      int comm_size)
{
    unsigned long long h = (unsigned long long)nbytes * 0x9E3779B97F4A7C15ULL;
    h ^= (unsigned long long)comm_size * 0xC2B2AE3D27D4EB4FULL;
    for (const char *c = kind; *c; c++) h = (h ^ (unsigned char)*c) * 0x100000001B3ULL;
    size_t i = (size_t)(h & (cap - 1));
    while (tab[i].kind != NULL
           && (tab[i].nbytes != nbytes || tab[i].comm_size != comm_size
               || strcmp(tab[i].kind, kind) != 0))
        i = (i + 1) & (cap - 1);
    return i;
}

static int grow(void)
{
    size_t cap = capacity ? 2 * capacity : 256;
    rankopt_class *tab = calloc(cap, sizeof *tab);
    if (tab == NULL) return 1;
    for (size_t i = 0; i < capacity; i++) {
        if (table[i].kind != NULL) {
            tab[slot_of(tab, cap, table[i].kind, table[i].nbytes, table[i].comm_size)] = table[i];
        }
    }
    free(table);
    table = tab;
    capacity = cap;
    return 0;
}

void rankopt_profile_init(void)
{
    const char *path = getenv("RANKOPT_PROFILE");
    if (path == NULL || *path == '\0' || rankopt_recording) return;
    folder = strdup(path);
    if (folder == NULL || grow() != 0 || rankopt_traffic_init() != 0) {
        fprintf(stderr, "rankopt shim: out of memory for the collective profile\n");
        return;
    }
    rankopt_recording = 1;
}

void rankopt_record(const char *kind, long long elements, MPI_Datatype type, MPI_Comm comm,
                    int per_rank, double seconds)
{
    int size = 0, tsize = 0, inter = 0;
    long long nbytes = 0;
    if (!rankopt_recording || comm == MPI_COMM_NULL) return;
    if (PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS || inter) return;
    if (PMPI_Comm_size(comm, &size) != MPI_SUCCESS) return;
    if (type != MPI_DATATYPE_NULL && PMPI_Type_size(type, &tsize) == MPI_SUCCESS)
        nbytes = elements * (long long)tsize * (per_rank ? size : 1);
    if (2 * (used + 1) > capacity && grow() != 0) return;
    size_t i = slot_of(table, capacity, kind, nbytes, size);
    if (table[i].kind == NULL) {
        table[i].kind = kind;
        table[i].nbytes = nbytes;
        table[i].comm_size = size;
        used++;
    }
    table[i].count++;
    table[i].seconds += seconds;
}

long long rankopt_sum_counts_int(const int *counts, MPI_Comm comm)
{
    int size = 0;
    long long total = 0;
    if (counts == NULL || PMPI_Comm_size(comm, &size) != MPI_SUCCESS) return 0;
    for (int i = 0; i < size; i++) total += counts[i];
    return total;
}

long long rankopt_sum_counts_count(const MPI_Count *counts, MPI_Comm comm)
{
    int size = 0;
    long long total = 0;
    if (counts == NULL || PMPI_Comm_size(comm, &size) != MPI_SUCCESS) return 0;
    for (int i = 0; i < size; i++) total += (long long)counts[i];
    return total;
}

void rankopt_profile_write(void)
{
    int rank = 0, size = 0, len = 0;
    char path[4096], tmp[4200], library[MPI_MAX_LIBRARY_VERSION_STRING + 1] = "";
    FILE *f;
    if (!rankopt_recording) return;
    rankopt_recording = 0;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &size);
    snprintf(path, sizeof path, "%s/mpi-rank-%d.tsv", folder, rank);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    f = fopen(tmp, "w");
    if (f == NULL) {
        fprintf(stderr, "rankopt shim: cannot write the collective profile '%s': %s\n", tmp,
                strerror(errno));
        return;
    }
    fprintf(f, "# rankopt profile 1 source=mpi world_rank=%d world_size=%d\n", rank, size);
    if (PMPI_Get_library_version(library, &len) == MPI_SUCCESS) {
        library[strcspn(library, "\r\n")] = '\0';
        fprintf(f, "# library %s\n", library);
    }
    for (size_t i = 0; i < capacity; i++) {
        if (table[i].kind != NULL) {
            fprintf(f, "%s\t%lld\t%d\t%lld\t%.9g\n", table[i].kind, table[i].nbytes,
                    table[i].comm_size, table[i].count, table[i].seconds);
        }
    }
    rankopt_traffic_write(f);
    if (fclose(f) != 0 || rename(tmp, path) != 0) {
        fprintf(stderr, "rankopt shim: cannot write the collective profile '%s': %s\n", path,
                strerror(errno));
    }
}
