/*
 * What a program sees of MPI_COMM_WORLD. Its launch rank is read through
 * PMPI_Comm_rank, below the shim, so the test can tell the two apart.
 *
 * One line per rank:
 *   rank R size N launch L sum S isum I scan P dup D half H/K cmp C tag_ub T
 *   f2c F group G err E gather G0,G1,...
 * F: 1 if MPI_Comm_f2c(MPI_Comm_c2f(MPI_COMM_WORLD)) is MPI_COMM_WORLD again,
 * G: rank of this process in MPI_Comm_group(MPI_COMM_WORLD),
 * E: 1 if, after MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN),
 *    a send to a rank that does not exist returns MPI_ERR_RANK.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    int rank, size, launch, sum, isum, scan, one = 1, dup_rank, half_rank, half_size, cmp, flag;
    int *tag_ub, *gathered, group_rank, err, err_class;
    MPI_Comm dup, half;
    MPI_Group group;
    MPI_Fint fworld;
    MPI_Request req;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    PMPI_Comm_rank(MPI_COMM_WORLD, &launch);

    MPI_Allreduce(&launch, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Iallreduce(&rank, &isum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    MPI_Scan(&one, &scan, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    gathered = malloc((size_t)size * sizeof(int));
    MPI_Allgather(&launch, 1, MPI_INT, gathered, 1, MPI_INT, MPI_COMM_WORLD);

    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Comm_rank(dup, &dup_rank);
    MPI_Comm_compare(MPI_COMM_WORLD, dup, &cmp);
    MPI_Comm_get_attr(dup, MPI_TAG_UB, &tag_ub, &flag);
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
    MPI_Comm_rank(half, &half_rank);
    MPI_Comm_size(half, &half_size);

    fworld = MPI_Comm_c2f(MPI_COMM_WORLD);
    MPI_Comm_group(MPI_COMM_WORLD, &group);
    MPI_Group_rank(group, &group_rank);
    MPI_Group_free(&group);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    err = MPI_Send(&one, 1, MPI_INT, size + 5, 0, MPI_COMM_WORLD);
    MPI_Error_class(err, &err_class);

    printf("rank %d size %d launch %d sum %d isum %d scan %d dup %d half %d/%d cmp %s tag_ub %d "
           "f2c %d group %d err %d gather",
           rank, size, launch, sum, isum, scan, dup_rank, half_rank, half_size,
           cmp == MPI_CONGRUENT ? "congruent" : "other", flag && *tag_ub >= 32767,
           MPI_Comm_f2c(fworld) == MPI_COMM_WORLD, group_rank, err_class == MPI_ERR_RANK);
    for (int k = 0; k < size; k++) printf("%c%d", k ? ',' : ' ', gathered[k]);
    printf("\n");
    fflush(stdout);

    free(gathered);
    MPI_Comm_free(&half);
    MPI_Comm_free(&dup);
    MPI_Finalize();
    return 0;
}
