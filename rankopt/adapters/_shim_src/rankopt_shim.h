/*
 * rankopt PMPI shim: state shared by the hand-written core (shim_core.c)
 * and the generated wrappers (wrappers.c, written by generate.py from
 * wrappers.tbl).
 *
 * The shim owns one communicator, `rankopt_world`: MPI_COMM_WORLD split
 * with key = new rank. While it is set, every wrapped call replaces an
 * MPI_Comm argument equal to MPI_COMM_WORLD by it. It is MPI_COMM_NULL
 * before MPI_Init, after MPI_Finalize and whenever RANKOPT_ORDER is unset,
 * and then every wrapper passes its arguments through unchanged.
 */
#ifndef RANKOPT_SHIM_H
#define RANKOPT_SHIM_H

#include <mpi.h>
#include <stdio.h>

#define RANKOPT_HIDDEN __attribute__((visibility("hidden")))
#define RANKOPT_EXPORT __attribute__((visibility("default")))

extern RANKOPT_HIDDEN MPI_Comm rankopt_world;

/* The communicator the library should see for the one the program passed. */
static inline MPI_Comm rankopt_in(MPI_Comm comm)
{
    return (comm == MPI_COMM_WORLD && rankopt_world != MPI_COMM_NULL) ? rankopt_world : comm;
}

/* The communicator the program should see for one the library returned. */
static inline MPI_Comm rankopt_out(MPI_Comm comm)
{
    return (rankopt_world != MPI_COMM_NULL && comm == rankopt_world) ? MPI_COMM_WORLD : comm;
}

/* Called after a successful PMPI_Init / PMPI_Init_thread: reads
 * RANKOPT_ORDER, validates it on rank 0, and builds rankopt_world.
 * On a bad order every rank finalizes and exits with status 1. */
RANKOPT_HIDDEN void rankopt_after_init(void);

/* Called before PMPI_Finalize: frees rankopt_world. */
RANKOPT_HIDDEN void rankopt_before_finalize(void);

/* Keyvals whose attributes MPI caches on MPI_COMM_WORLD only
 * (MPI_TAG_UB, MPI_HOST, ...): looked up on the real world communicator
 * when the reordered one does not have them. */
RANKOPT_HIDDEN int rankopt_is_predefined_keyval(int keyval);

/* The collective recorder (shim_profile.c), on when RANKOPT_PROFILE names a
 * folder. rankopt_record adds one call of `kind` on `comm` moving
 * `elements` items of `type` (times the communicator size when
 * `per_rank`), taking `seconds`, to its class. */
extern RANKOPT_HIDDEN int rankopt_recording;
RANKOPT_HIDDEN void rankopt_profile_init(void);
RANKOPT_HIDDEN void rankopt_profile_write(void);
RANKOPT_HIDDEN void rankopt_record(const char *kind, long long elements, MPI_Datatype type,
                                   MPI_Comm comm, int per_rank, double seconds);
/* Sum of a per-rank counts array (int or MPI_Count) over `comm`'s size. */
RANKOPT_HIDDEN long long rankopt_sum_counts_int(const int *counts, MPI_Comm comm);
RANKOPT_HIDDEN long long rankopt_sum_counts_count(const MPI_Count *counts, MPI_Comm comm);

/* The point-to-point traffic recorder (shim_traffic.c), on with the
 * collective recorder. Counts (`count`) are elements of `type`; `comm` is
 * the communicator the library sees; `big` says that a counts array holds
 * MPI_Count (the large-count `_c` twins) rather than int; `persist` is NULL
 * for a call that sends now, or the persistent request the call made (its
 * pairs are counted at each MPI_Start). `back`: the data of a one-sided
 * call flows from the target to this process. */
RANKOPT_HIDDEN int rankopt_traffic_init(void);
RANKOPT_HIDDEN void rankopt_traffic_write(FILE *f);
RANKOPT_HIDDEN void rankopt_traffic_send(long long count, MPI_Datatype type, int dest,
                                         MPI_Comm comm, MPI_Request *persist);
RANKOPT_HIDDEN void rankopt_traffic_start(int count, MPI_Request *requests);
RANKOPT_HIDDEN void rankopt_traffic_forget(MPI_Request *request);
RANKOPT_HIDDEN void rankopt_traffic_alltoallv(const void *sendbuf, const void *sendcounts,
                                              MPI_Datatype sendtype, const void *recvcounts,
                                              MPI_Datatype recvtype, int big, MPI_Comm comm,
                                              MPI_Request *persist);
RANKOPT_HIDDEN void rankopt_traffic_alltoallw(const void *sendbuf, const void *sendcounts,
                                              const MPI_Datatype *sendtypes,
                                              const void *recvcounts,
                                              const MPI_Datatype *recvtypes, int big,
                                              MPI_Comm comm, MPI_Request *persist);
RANKOPT_HIDDEN void rankopt_traffic_neighbor(long long count, MPI_Datatype type, MPI_Comm comm,
                                             MPI_Request *persist);
RANKOPT_HIDDEN void rankopt_traffic_neighbor_v(const void *counts, MPI_Datatype type, int big,
                                               MPI_Comm comm, MPI_Request *persist);
RANKOPT_HIDDEN void rankopt_traffic_neighbor_w(const void *counts, const MPI_Datatype *types,
                                               int big, MPI_Comm comm, MPI_Request *persist);
RANKOPT_HIDDEN void rankopt_traffic_rma(long long count, MPI_Datatype type, int target,
                                        MPI_Win win, int back);

#endif
