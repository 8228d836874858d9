/*
 * Private to kernels/indexer_wgmma.cu: the warpgroup MMA instructions of its scans, a
 * key tile's four k-steps (k = 32 bytes each) in one asm block each: wgmma_ss4 (both
 * operands in shared memory: the FP8 scan), wgmma_ss4_n128 (the same for two query
 * rows at once) and wgmma_rs4 (A in registers: the MXFP4 scan).
 * Included by indexer_wgmma.cu inside its anonymous namespace; not a header of its own.
 */
#ifndef STRATA_KERNELS_INDEXER_MMA_INT_H
#define STRATA_KERNELS_INDEXER_MMA_INT_H

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
/* A tile's four k-steps with A from shared memory too (the FP8 scan): as wgmma_rs4
 * below, both descriptors' offsets (32 bytes of k a step) added in the asm block. */
__device__ __forceinline__ void wgmma_ss4(float (&d)[32], uint64_t da, uint64_t db)
{
	asm volatile("{\n.reg .pred pz, po;\n.reg .b64 a1, a2, a3, b1, b2, b3;\n"
		     "setp.ne.b32 pz, %34, %34;\nsetp.eq.b32 po, %34, %34;\n"
		     "add.s64 a1, %32, 2;\nadd.s64 a2, %32, 4;\nadd.s64 a3, %32, 6;\n"
		     "add.s64 b1, %33, 2;\nadd.s64 b2, %33, 4;\nadd.s64 b3, %33, 6;\n"
		     "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, pz, 1, 1;\n"
		     "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, a1, b1, po, 1, 1;\n"
		     "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, a2, b2, po, 1, 1;\n"
		     "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, a3, b3, po, 1, 1;\n}\n"
		     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
		     : "l"(da), "l"(db), "r"(0));
}

/* wgmma_ss4 for two query rows at once (N = 128: rows r and r + 1's queries, adjacent
 * in shared memory, are one B of 128 heads): the key tile is read from shared memory
 * once for both rows, not once a row. d[0 .. 31]: row r's accumulators, d[32 .. 63]:
 * row r + 1's, each laid out as wgmma_ss4's d. */
__device__ __forceinline__ void wgmma_ss4_n128(float (&d)[64], uint64_t da, uint64_t db)
{
	asm volatile("{\n.reg .pred pz, po;\n.reg .b64 a1, a2, a3, b1, b2, b3;\n"
		     "setp.ne.b32 pz, %66, %66;\nsetp.eq.b32 po, %66, %66;\n"
		     "add.s64 a1, %64, 2;\nadd.s64 a2, %64, 4;\nadd.s64 a3, %64, 6;\n"
		     "add.s64 b1, %65, 2;\nadd.s64 b2, %65, 4;\nadd.s64 b3, %65, 6;\n"
		     "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, pz, 1, 1;\n"
		     "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, a1, b1, po, 1, 1;\n"
		     "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, a2, b2, po, 1, 1;\n"
		     "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, a3, b3, po, 1, 1;\n}\n"
		     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
		     : "l"(da), "l"(db), "r"(0));
}

/* A whole tile's four k-steps (k-step s: a[4s .. 4s + 3], the B descriptor + 2s; step 0
 * with scale-d = 0, D = A B) in one asm block, the descriptors' offsets added in it. As
 * four calls of one wgmma each (one 64-bit descriptor operand a call) ptxas rebuilt
 * the offset descriptors in vector registers and moved them back to uniform ones in
 * every tile of the two-set loop (IMAD.U32, R2UR, UIADD3: s38's profile). H200, one
 * row, same call (bench/results/2026-12-02-h200-s39, run 1): MXFP4 1M 19.0 / 19.2 us
 * against 19.6 / 19.5, 128K 13.4 - 13.5 against 13.8; FP8 (wgmma_ss4) unchanged. */
__device__ __forceinline__ void wgmma_rs4(float (&d)[32], const uint32_t (&a)[16], uint64_t db)
{
	asm volatile("{\n.reg .pred pz, po;\n.reg .b64 d1, d2, d3;\n"
		     "setp.ne.b32 pz, %49, %49;\nsetp.eq.b32 po, %49, %49;\n"
		     "add.s64 d1, %48, 2;\nadd.s64 d2, %48, 4;\nadd.s64 d3, %48, 6;\n"
		     "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %48, pz, 1, 1;\n"
		     "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%36, %37, %38, %39}, d1, po, 1, 1;\n"
		     "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%40, %41, %42, %43}, d2, po, 1, 1;\n"
		     "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%44, %45, %46, %47}, d3, po, 1, 1;\n}\n"
		     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
		     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(a[4]), "r"(a[5]), "r"(a[6]), "r"(a[7]), "r"(a[8]), "r"(a[9]), "r"(a[10]), "r"(a[11]), "r"(a[12]), "r"(a[13]), "r"(a[14]), "r"(a[15]), "l"(db), "r"(0));
}
#endif

#endif /* STRATA_KERNELS_INDEXER_MMA_INT_H */
