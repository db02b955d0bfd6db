/*
 * rankopt PMPI shim, point-to-point traffic recorder (`rankopt profile`).
 *
 * On with the collective recorder (RANKOPT_PROFILE). The wrappers of the
 * calls listed in generate.py's TRAFFIC call the functions below, which add
 * the bytes and the messages of the call to two dense arrays indexed by
 * MPI_COMM_WORLD rank as launched: what this process sent each rank, and
 * (one-sided gets) what it fetched from each rank. At MPI_Finalize
 * shim_profile.c writes them into the process's file as
 *
 *     p2p <TAB> src <TAB> dst <TAB> bytes <TAB> messages
 *
 * lines, one per (src, dst) pair with traffic (src or dst is the process
 * itself; traffic to itself is not written).
 *
 * Ranks: a communicator's (for an intercommunicator: its remote group's)
 * ranks are translated to world ranks once, with MPI_Comm_group and
 * MPI_Group_translate_ranks, and cached on the communicator as an attribute
 * (freed with it); windows likewise with MPI_Win_get_group. A
 * neighbourhood collective sends to the out-neighbours of the
 * communicator's topology, in the standard's order: MPI_Cart_shift's source
 * and destination for each dimension, MPI_Graph_neighbors,
 * MPI_Dist_graph_neighbors' destinations (also cached). MPI_PROC_NULL
 * partners are skipped.
 *
 * Persistent requests (MPI_Send_init & co., persistent alltoallv/w and
 * neighbourhood collectives) are remembered in a small table from request
 * to their (destination, bytes) pairs, counted at every MPI_Start and
 * MPI_Startall, and forgotten at MPI_Request_free.
 *
 * Bytes are element counts times MPI_Type_size. A send of zero bytes is a
 * message; zero-byte blocks of collectives are not. The counters are not
 * updated atomically: programs that send from several threads at once
 * (MPI_THREAD_MULTIPLE) may lose a few counts.
 */
#include "rankopt_shim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int size;   /* ranks of the (remote) group */
    int *world; /* their world ranks, -1 for none */
    int nout;   /* out-neighbours; -1: not looked up yet */
    int *out;   /* their world ranks, -1 for MPI_PROC_NULL */
} rankopt_ranks;

typedef struct {
    int dst;
    long long bytes;
} rankopt_pair;

typedef struct rankopt_req {
    MPI_Request req;
    int n;
    rankopt_pair *pairs;
    struct rankopt_req *next;
} rankopt_req;

#define RANKOPT_REQ_BUCKETS 1024

static int world_size = 0, world_rank = -1;
static long long *sent_bytes = NULL, *sent_msgs = NULL, *got_bytes = NULL, *got_msgs = NULL;
static MPI_Group world_group = MPI_GROUP_NULL;
static int comm_key = MPI_KEYVAL_INVALID, win_key = MPI_KEYVAL_INVALID;
static rankopt_pair *pend = NULL;
static int npend = 0, cappend = 0;
static rankopt_req *requests[RANKOPT_REQ_BUCKETS];

static void free_ranks(rankopt_ranks *r)
{
    if (r == NULL) return;
    free(r->world);
    free(r->out);
    free(r);
}

static int free_comm_ranks(MPI_Comm comm, int key, void *value, void *extra)
{
    (void)comm, (void)key, (void)extra;
    free_ranks(value);
    return MPI_SUCCESS;
}

static int free_win_ranks(MPI_Win win, int key, void *value, void *extra)
{
    (void)win, (void)key, (void)extra;
    free_ranks(value);
    return MPI_SUCCESS;
}

int rankopt_traffic_init(void)
{
    size_t n;
    PMPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &world_size);
    n = world_size > 0 ? (size_t)world_size : 1;
    sent_bytes = calloc(n, sizeof *sent_bytes);
    sent_msgs = calloc(n, sizeof *sent_msgs);
    got_bytes = calloc(n, sizeof *got_bytes);
    got_msgs = calloc(n, sizeof *got_msgs);
    if (!sent_bytes || !sent_msgs || !got_bytes || !got_msgs) return 1;
    if (PMPI_Comm_group(MPI_COMM_WORLD, &world_group) != MPI_SUCCESS
        || PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, free_comm_ranks, &comm_key, NULL)
               != MPI_SUCCESS
        || PMPI_Win_create_keyval(MPI_WIN_NULL_COPY_FN, free_win_ranks, &win_key, NULL)
               != MPI_SUCCESS)
        return 1;
    return 0;
}

/* The world ranks of `group`'s members. */
static rankopt_ranks *translate(MPI_Group group)
{
    int n = 0;
    int *idx;
    rankopt_ranks *r;
    if (PMPI_Group_size(group, &n) != MPI_SUCCESS || n < 0) return NULL;
    r = calloc(1, sizeof *r);
    idx = malloc((size_t)(n ? n : 1) * sizeof(int));
    if (r != NULL) r->world = malloc((size_t)(n ? n : 1) * sizeof(int));
    if (r == NULL || idx == NULL || r->world == NULL) {
        free(idx);
        free_ranks(r);
        return NULL;
    }
    for (int i = 0; i < n; i++) idx[i] = i;
    if (n > 0 && PMPI_Group_translate_ranks(group, n, idx, world_group, r->world) != MPI_SUCCESS) {
        free(idx);
        free_ranks(r);
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        if (r->world[i] < 0 || r->world[i] >= world_size) r->world[i] = -1; /* MPI_UNDEFINED */
    }
    free(idx);
    r->size = n;
    r->nout = -1;
    return r;
}

static rankopt_ranks *comm_ranks(MPI_Comm comm)
{
    void *value = NULL;
    int flag = 0, inter = 0;
    MPI_Group group;
    rankopt_ranks *r;
    if (comm == MPI_COMM_NULL) return NULL;
    if (PMPI_Comm_get_attr(comm, comm_key, &value, &flag) == MPI_SUCCESS && flag) return value;
    if (PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS) return NULL;
    if ((inter ? PMPI_Comm_remote_group(comm, &group) : PMPI_Comm_group(comm, &group))
        != MPI_SUCCESS)
        return NULL;
    r = translate(group);
    PMPI_Group_free(&group);
    if (r != NULL && PMPI_Comm_set_attr(comm, comm_key, r) != MPI_SUCCESS) {
        free_ranks(r);
        return NULL;
    }
    return r;
}

static rankopt_ranks *win_ranks(MPI_Win win)
{
    void *value = NULL;
    int flag = 0;
    MPI_Group group;
    rankopt_ranks *r;
    if (win == MPI_WIN_NULL) return NULL;
    if (PMPI_Win_get_attr(win, win_key, &value, &flag) == MPI_SUCCESS && flag) return value;
    if (PMPI_Win_get_group(win, &group) != MPI_SUCCESS) return NULL;
    r = translate(group);
    PMPI_Group_free(&group);
    if (r != NULL && PMPI_Win_set_attr(win, win_key, r) != MPI_SUCCESS) {
        free_ranks(r);
        return NULL;
    }
    return r;
}

/* The world rank of rank `rank` of `comm`, -1 for none (MPI_PROC_NULL). */
static int world_of(MPI_Comm comm, int rank)
{
    rankopt_ranks *r;
    if (rank == MPI_PROC_NULL || rank < 0) return -1;
    if (comm == MPI_COMM_WORLD) return rank < world_size ? rank : -1;
    r = comm_ranks(comm);
    return (r != NULL && rank < r->size) ? r->world[rank] : -1;
}

/* The out-neighbours of `comm`'s topology (world ranks, -1 for MPI_PROC_NULL). */
static int out_neighbours(MPI_Comm comm, const int **out)
{
    int topo = MPI_UNDEFINED, n = 0, me = 0;
    int *nb = NULL;
    rankopt_ranks *r = comm_ranks(comm);
    *out = NULL;
    if (r == NULL) return 0;
    if (r->nout >= 0) {
        *out = r->out;
        return r->nout;
    }
    if (PMPI_Topo_test(comm, &topo) != MPI_SUCCESS) return 0;
    if (topo == MPI_CART) {
        int ndims = 0;
        PMPI_Cartdim_get(comm, &ndims);
        nb = malloc((size_t)(2 * ndims + 1) * sizeof(int));
        if (nb == NULL) return 0;
        for (int d = 0; d < ndims; d++) PMPI_Cart_shift(comm, d, 1, &nb[2 * d], &nb[2 * d + 1]);
        n = 2 * ndims;
    }
    else if (topo == MPI_GRAPH) {
        PMPI_Comm_rank(comm, &me);
        PMPI_Graph_neighbors_count(comm, me, &n);
        nb = malloc((size_t)(n + 1) * sizeof(int));
        if (nb == NULL) return 0;
        PMPI_Graph_neighbors(comm, me, n, nb);
    }
    else if (topo == MPI_DIST_GRAPH) {
        int indeg = 0, outdeg = 0, weighted = 0;
        int *src, *srcw, *dstw;
        PMPI_Dist_graph_neighbors_count(comm, &indeg, &outdeg, &weighted);
        src = malloc((size_t)(indeg + 1) * sizeof(int));
        srcw = malloc((size_t)(indeg + 1) * sizeof(int));
        dstw = malloc((size_t)(outdeg + 1) * sizeof(int));
        nb = malloc((size_t)(outdeg + 1) * sizeof(int));
        if (src && srcw && dstw && nb) {
            PMPI_Dist_graph_neighbors(comm, indeg, src, weighted ? srcw : MPI_UNWEIGHTED, outdeg,
                                      nb, weighted ? dstw : MPI_UNWEIGHTED);
            n = outdeg;
        }
        free(src);
        free(srcw);
        free(dstw);
    }
    for (int i = 0; i < n; i++) {
        int k = nb[i];
        nb[i] = (k == MPI_PROC_NULL || k < 0 || k >= r->size) ? -1 : r->world[k];
    }
    r->out = nb;
    r->nout = nb != NULL ? n : 0;
    *out = r->out;
    return r->nout;
}

static long long type_size(MPI_Datatype type)
{
    int size = 0;
    if (type == MPI_DATATYPE_NULL || PMPI_Type_size(type, &size) != MPI_SUCCESS) return 0;
    return size;
}

static long long count_at(const void *counts, int i, int big)
{
    if (counts == NULL) return 0;
    return big ? (long long)((const MPI_Count *)counts)[i] : (long long)((const int *)counts)[i];
}

static void sent(int dst, long long bytes)
{
    if (dst < 0 || dst >= world_size || dst == world_rank) return;
    sent_bytes[dst] += bytes;
    sent_msgs[dst] += 1;
}

/* A (destination, bytes) pair of the call being recorded; settle() counts
 * them now, or remembers them under a persistent request. */
static void pending(int dst, long long bytes)
{
    if (dst < 0) return;
    if (npend == cappend) {
        int cap = cappend ? 2 * cappend : 64;
        rankopt_pair *p = realloc(pend, (size_t)cap * sizeof *p);
        if (p == NULL) return;
        pend = p;
        cappend = cap;
    }
    pend[npend].dst = dst;
    pend[npend].bytes = bytes;
    npend++;
}

static size_t bucket(MPI_Request req)
{
    unsigned long long h = 0;
    memcpy(&h, &req, sizeof req < sizeof h ? sizeof req : sizeof h);
    h *= 0x9E3779B97F4A7C15ULL;
    return (size_t)(h >> 54) % RANKOPT_REQ_BUCKETS;
}

void rankopt_traffic_forget(MPI_Request *req)
{
    rankopt_req **link;
    if (req == NULL || *req == MPI_REQUEST_NULL) return;
    for (link = &requests[bucket(*req)]; *link != NULL; link = &(*link)->next) {
        if ((*link)->req == *req) {
            rankopt_req *gone = *link;
            *link = gone->next;
            free(gone->pairs);
            free(gone);
            return;
        }
    }
}

static void settle(MPI_Request *persist)
{
    if (persist == NULL) {
        for (int i = 0; i < npend; i++) sent(pend[i].dst, pend[i].bytes);
    }
    else if (*persist != MPI_REQUEST_NULL) {
        rankopt_req *r = malloc(sizeof *r);
        rankopt_traffic_forget(persist); /* a handle MPI reused */
        if (r != NULL) {
            r->pairs = malloc((size_t)(npend ? npend : 1) * sizeof *r->pairs);
            if (r->pairs == NULL) {
                free(r);
            }
            else {
                size_t b = bucket(*persist);
                memcpy(r->pairs, pend, (size_t)npend * sizeof *r->pairs);
                r->n = npend;
                r->req = *persist;
                r->next = requests[b];
                requests[b] = r;
            }
        }
    }
    npend = 0;
}

void rankopt_traffic_start(int count, MPI_Request *reqs)
{
    if (reqs == NULL) return;
    for (int i = 0; i < count; i++) {
        if (reqs[i] == MPI_REQUEST_NULL) continue;
        for (rankopt_req *r = requests[bucket(reqs[i])]; r != NULL; r = r->next) {
            if (r->req == reqs[i]) {
                for (int k = 0; k < r->n; k++) sent(r->pairs[k].dst, r->pairs[k].bytes);
                break;
            }
        }
    }
}

void rankopt_traffic_send(long long count, MPI_Datatype type, int dest, MPI_Comm comm,
                          MPI_Request *persist)
{
    int dst = world_of(comm, dest);
    if (dst < 0) return;
    if (persist == NULL) {
        sent(dst, count * type_size(type));
        return;
    }
    pending(dst, count * type_size(type));
    settle(persist);
}

/* Size of the group a collective on `comm` sends to (the remote one of an intercommunicator). */
static int peers(MPI_Comm comm, const int **world)
{
    rankopt_ranks *r = comm_ranks(comm);
    *world = r != NULL ? r->world : NULL;
    return r != NULL ? r->size : 0;
}

void rankopt_traffic_alltoallv(const void *sendbuf, const void *sendcounts, MPI_Datatype sendtype,
                               const void *recvcounts, MPI_Datatype recvtype, int big,
                               MPI_Comm comm, MPI_Request *persist)
{
    const int *world;
    int n = peers(comm, &world);
    long long size;
    if (sendbuf == MPI_IN_PLACE) { /* the receive arguments describe the blocks sent */
        sendcounts = recvcounts;
        sendtype = recvtype;
    }
    size = type_size(sendtype);
    for (int i = 0; i < n; i++) {
        long long bytes = count_at(sendcounts, i, big) * size;
        if (bytes > 0) pending(world[i], bytes);
    }
    settle(persist);
}

void rankopt_traffic_alltoallw(const void *sendbuf, const void *sendcounts,
                               const MPI_Datatype *sendtypes, const void *recvcounts,
                               const MPI_Datatype *recvtypes, int big, MPI_Comm comm,
                               MPI_Request *persist)
{
    const int *world;
    int n = peers(comm, &world);
    if (sendbuf == MPI_IN_PLACE) {
        sendcounts = recvcounts;
        sendtypes = recvtypes;
    }
    for (int i = 0; i < n && sendtypes != NULL; i++) {
        long long bytes = count_at(sendcounts, i, big) * type_size(sendtypes[i]);
        if (bytes > 0) pending(world[i], bytes);
    }
    settle(persist);
}

void rankopt_traffic_neighbor(long long count, MPI_Datatype type, MPI_Comm comm,
                              MPI_Request *persist)
{
    const int *out;
    int n = out_neighbours(comm, &out);
    long long bytes = count * type_size(type);
    for (int i = 0; i < n && bytes > 0; i++) pending(out[i], bytes);
    settle(persist);
}

void rankopt_traffic_neighbor_v(const void *counts, MPI_Datatype type, int big, MPI_Comm comm,
                                MPI_Request *persist)
{
    const int *out;
    int n = out_neighbours(comm, &out);
    long long size = type_size(type);
    for (int i = 0; i < n; i++) {
        long long bytes = count_at(counts, i, big) * size;
        if (bytes > 0) pending(out[i], bytes);
    }
    settle(persist);
}

void rankopt_traffic_neighbor_w(const void *counts, const MPI_Datatype *types, int big,
                                MPI_Comm comm, MPI_Request *persist)
{
    const int *out;
    int n = out_neighbours(comm, &out);
    for (int i = 0; i < n && types != NULL; i++) {
        long long bytes = count_at(counts, i, big) * type_size(types[i]);
        if (bytes > 0) pending(out[i], bytes);
    }
    settle(persist);
}

void rankopt_traffic_rma(long long count, MPI_Datatype type, int target, MPI_Win win, int back)
{
    rankopt_ranks *r;
    int peer;
    long long bytes;
    if (target == MPI_PROC_NULL || target < 0) return;
    r = win_ranks(win);
    if (r == NULL || target >= r->size) return;
    peer = r->world[target];
    if (peer < 0 || peer == world_rank) return;
    bytes = count * type_size(type);
    if (!back) {
        sent(peer, bytes);
        return;
    }
    got_bytes[peer] += bytes;
    got_msgs[peer] += 1;
}

void rankopt_traffic_write(FILE *f)
{
    for (int r = 0; r < world_size && f != NULL; r++) {
        if (sent_msgs[r] > 0)
            fprintf(f, "p2p\t%d\t%d\t%lld\t%lld\n", world_rank, r, sent_bytes[r], sent_msgs[r]);
        if (got_msgs[r] > 0)
            fprintf(f, "p2p\t%d\t%d\t%lld\t%lld\n", r, world_rank, got_bytes[r], got_msgs[r]);
    }
    if (world_group != MPI_GROUP_NULL) PMPI_Group_free(&world_group);
}
