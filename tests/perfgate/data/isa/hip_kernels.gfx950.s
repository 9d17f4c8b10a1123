	.amdgcn_target "amdgcn-amd-amdhsa--gfx950"
	.amdhsa_code_object_version 6
	.text
	.protected	starved                 ; -- Begin function starved
	.globl	starved
	.p2align	8
	.type	starved,@function
starved:                                ; @starved
; %bb.0:
	s_load_dwordx4 s[0:3], s[0:1], 0x0
	v_mov_b32_e32 v13, 0
	v_lshlrev_b32_e32 v12, 2, v0
	s_waitcnt lgkmcnt(0)
	v_lshl_add_u64 v[4:5], s[0:1], 0, v[12:13]
	v_add_co_u32_e32 v14, vcc, 0x1000, v4
	s_nop 1
	v_addc_co_u32_e32 v15, vcc, 0, v5, vcc
	v_add_co_u32_e32 v8, vcc, 0x2000, v4
	s_nop 1
	v_addc_co_u32_e32 v9, vcc, 0, v5, vcc
	global_load_dword v0, v[8:9], off
	v_add_co_u32_e32 v6, vcc, 0x3000, v4
                                        ; kill: killed $vgpr8 killed $vgpr9
	s_waitcnt vmcnt(0)
	scratch_store_dword off, v0, off offset:40 ; 4-byte Folded Spill
	global_load_dword v0, v[8:9], off offset:1024
	v_addc_co_u32_e32 v7, vcc, 0, v5, vcc
	s_waitcnt vmcnt(0)
	scratch_store_dword off, v0, off offset:32 ; 4-byte Folded Spill
	global_load_dword v0, v[8:9], off offset:2048
	s_waitcnt vmcnt(0)
	scratch_store_dword off, v0, off offset:28 ; 4-byte Folded Spill
	global_load_dword v0, v[8:9], off offset:3072
	v_add_co_u32_e32 v8, vcc, 0x4000, v4
	s_waitcnt vmcnt(0)
	scratch_store_dword off, v0, off offset:24 ; 4-byte Folded Spill
	global_load_dword v0, v[6:7], off
	v_addc_co_u32_e32 v9, vcc, 0, v5, vcc
	v_add_co_u32_e32 v10, vcc, 0x5000, v4
	scratch_load_dword v3, off, off offset:24 ; 4-byte Folded Reload
	s_nop 0
	v_addc_co_u32_e32 v11, vcc, 0, v5, vcc
	v_add_co_u32_e32 v28, vcc, 0x6000, v4
	s_waitcnt vmcnt(1)
	scratch_store_dword off, v0, off        ; 4-byte Folded Spill
	global_load_dword v0, v[6:7], off offset:1024
	v_addc_co_u32_e32 v29, vcc, 0, v5, vcc
	v_add_co_u32_e32 v4, vcc, 0x7000, v4
	scratch_load_dword v1, off, off         ; 4-byte Folded Reload
	s_nop 0
	v_addc_co_u32_e32 v5, vcc, 0, v5, vcc
	s_waitcnt vmcnt(1)
	scratch_store_dword off, v0, off offset:60 ; 4-byte Folded Spill
	global_load_dword v0, v[6:7], off offset:2048
	s_waitcnt vmcnt(0)
	scratch_store_dword off, v0, off offset:56 ; 4-byte Folded Spill
	global_load_dword v0, v[6:7], off offset:3072
	s_nop 0
	global_load_dword v7, v[4:5], off offset:2048
	s_waitcnt vmcnt(1)
	scratch_store_dword off, v0, off offset:52 ; 4-byte Folded Spill
	global_load_dword v0, v[8:9], off
	s_nop 0
	global_load_dword v26, v[8:9], off offset:1024
	global_load_dword v24, v[8:9], off offset:2048
	global_load_dword v22, v[8:9], off offset:3072
	global_load_dword v21, v[10:11], off
	global_load_dword v19, v[10:11], off offset:1024
	global_load_dword v18, v[10:11], off offset:2048
	s_nop 0
	global_load_dword v10, v[10:11], off offset:3072
	s_nop 0
	global_load_dword v6, v[28:29], off
	global_load_dword v16, v[28:29], off offset:1024
	global_load_dword v9, v[28:29], off offset:2048
	global_load_dword v27, v[28:29], off offset:3072
	global_load_dword v8, v[4:5], off
	global_load_dword v20, v[4:5], off offset:3072
	s_nop 0
	global_load_dword v28, v[14:15], off
	global_load_dword v30, v[14:15], off offset:1024
	global_load_dword v29, v[14:15], off offset:2048
	global_load_dword v25, v[14:15], off offset:3072
	global_load_dword v23, v12, s[0:1]
	global_load_dword v31, v12, s[0:1] offset:1024
	s_waitcnt vmcnt(16)
	v_mov_b32_e32 v17, v22
	global_load_dword v15, v12, s[0:1] offset:2048
	global_load_dword v14, v12, s[0:1] offset:3072
	s_waitcnt vmcnt(15)
	v_mov_b32_e32 v11, v18
	scratch_store_dword off, v7, off offset:48 ; 4-byte Folded Spill
	scratch_load_dword v18, off, off offset:56 ; 4-byte Folded Reload
	v_mov_b32_e32 v22, v26
	s_waitcnt vmcnt(16)
	scratch_store_dword off, v10, off offset:8 ; 4-byte Folded Spill
	scratch_store_dword off, v0, off offset:4 ; 4-byte Folded Spill
	global_load_dword v0, v[4:5], off offset:1024
	s_waitcnt vmcnt(8)
	v_fma_f32 v2, v23, v20, 0
	s_waitcnt vmcnt(7)
	v_fmac_f32_e32 v2, v31, v7
	v_mov_b32_e32 v7, v6
	scratch_load_dword v6, off, off offset:40 ; 4-byte Folded Reload
	scratch_load_dword v5, off, off offset:32 ; 4-byte Folded Reload
	scratch_load_dword v4, off, off offset:28 ; 4-byte Folded Reload
	s_movk_i32 s0, 0x1000
	scratch_store_dword off, v8, off offset:68 ; 4-byte Folded Spill
	scratch_store_dword off, v7, off offset:20 ; 4-byte Folded Spill
	scratch_store_dword off, v11, off offset:12 ; 4-byte Folded Spill
	scratch_store_dword off, v22, off offset:44 ; 4-byte Folded Spill
	scratch_store_dword off, v17, off offset:36 ; 4-byte Folded Spill
	s_movk_i32 s1, 0x6000
	s_waitcnt vmcnt(8)
	scratch_store_dword off, v0, off offset:64 ; 4-byte Folded Spill
	v_fmac_f32_e32 v2, v15, v0
	scratch_load_dword v0, off, off offset:60 ; 4-byte Folded Reload
	v_fmac_f32_e32 v2, v14, v8
	v_fmac_f32_e32 v2, v28, v27
	v_fmac_f32_e32 v2, v30, v9
	v_fmac_f32_e32 v2, v29, v16
	v_mov_b32_e32 v8, v16
	v_mov_b32_e32 v16, v19
	v_mov_b32_e32 v19, v21
	v_mov_b32_e32 v21, v24
	scratch_load_dword v24, off, off offset:4 ; 4-byte Folded Reload
	scratch_load_dword v26, off, off offset:52 ; 4-byte Folded Reload
	v_fmac_f32_e32 v2, v25, v7
	scratch_store_dword off, v16, off offset:16 ; 4-byte Folded Spill
	s_waitcnt vmcnt(12)
	v_fmac_f32_e32 v2, v6, v10
	s_waitcnt vmcnt(11)
	v_fmac_f32_e32 v2, v5, v11
	s_waitcnt vmcnt(10)
	v_fmac_f32_e32 v2, v4, v16
	v_fmac_f32_e32 v2, v3, v19
	v_fmac_f32_e32 v2, v1, v17
	s_waitcnt vmcnt(3)
	v_fmac_f32_e32 v2, v0, v21
	v_fmac_f32_e32 v2, v18, v22
	s_waitcnt vmcnt(1)
	v_fmac_f32_e32 v2, v26, v24
	v_fmac_f32_e32 v2, v26, v24
	v_fmac_f32_e32 v2, v18, v22
	v_fmac_f32_e32 v2, v0, v21
	v_fmac_f32_e32 v2, v1, v17
	v_fmac_f32_e32 v2, v3, v19
	v_fmac_f32_e32 v2, v4, v16
	v_fmac_f32_e32 v2, v5, v11
	v_fmac_f32_e32 v2, v6, v10
	v_fmac_f32_e32 v2, v25, v7
	v_fmac_f32_e32 v2, v29, v8
	v_mov_b32_e32 v7, v8
	v_fmac_f32_e32 v2, v30, v9
	v_mov_b32_e32 v8, v9
	scratch_load_dword v9, off, off offset:68 ; 4-byte Folded Reload
	v_mov_b32_e32 v10, v6
	v_mov_b32_e32 v6, v27
	scratch_load_dword v27, off, off offset:64 ; 4-byte Folded Reload
	v_mov_b32_e32 v24, v18
	scratch_load_dword v18, off, off offset:48 ; 4-byte Folded Reload
	v_fmac_f32_e32 v2, v28, v6
	v_mov_b32_e32 v22, v0
	v_mov_b32_e32 v16, v4
	v_mov_b32_e32 v11, v5
	v_lshl_add_u64 v[0:1], s[2:3], 0, v[12:13]
	v_mov_b32_e32 v17, v3
	s_waitcnt vmcnt(2)
	v_fmac_f32_e32 v2, v14, v9
	s_waitcnt vmcnt(1)
	v_fmac_f32_e32 v2, v15, v27
	s_waitcnt vmcnt(0)
	v_fmac_f32_e32 v2, v31, v18
	v_fmac_f32_e32 v2, v23, v20
	v_mul_f32_e32 v5, v2, v23
	v_mul_f32_e32 v4, v2, v15
	global_store_dword v12, v5, s[2:3]
	v_mul_f32_e32 v5, v2, v31
	global_store_dword v12, v4, s[2:3] offset:2048
	v_mul_f32_e32 v3, v2, v14
	v_add_co_u32_e32 v4, vcc, s0, v0
	global_store_dword v12, v5, s[2:3] offset:1024
	global_store_dword v12, v3, s[2:3] offset:3072
	v_addc_co_u32_e32 v5, vcc, 0, v1, vcc
	v_mul_f32_e32 v3, v2, v30
	global_store_dword v[4:5], v3, off offset:1024
	v_mul_f32_e32 v3, v2, v29
	global_store_dword v[4:5], v3, off offset:2048
	v_mul_f32_e32 v3, v2, v25
	s_movk_i32 s0, 0x2000
	global_store_dword v[4:5], v3, off offset:3072
	v_add_co_u32_e32 v4, vcc, s0, v0
	v_mul_f32_e32 v3, v2, v28
	s_nop 0
	v_addc_co_u32_e32 v5, vcc, 0, v1, vcc
	global_store_dword v[4:5], v3, off offset:-4096
	v_mul_f32_e32 v3, v2, v10
	global_store_dword v[4:5], v3, off
	v_mul_f32_e32 v3, v2, v11
	global_store_dword v[4:5], v3, off offset:1024
	v_mul_f32_e32 v3, v2, v16
	global_store_dword v[4:5], v3, off offset:2048
	v_mul_f32_e32 v3, v2, v17
	s_movk_i32 s0, 0x3000
	global_store_dword v[4:5], v3, off offset:3072
	v_add_co_u32_e32 v4, vcc, s0, v0
	v_mul_f32_e32 v3, v2, v22
	s_nop 0
	v_addc_co_u32_e32 v5, vcc, 0, v1, vcc
	global_store_dword v[4:5], v3, off offset:1024
	v_mul_f32_e32 v3, v2, v24
	global_store_dword v[4:5], v3, off offset:2048
	v_mul_f32_e32 v3, v2, v26
	global_store_dword v[4:5], v3, off offset:3072
	scratch_load_dword v3, off, off         ; 4-byte Folded Reload
	s_movk_i32 s0, 0x4000
	v_add_co_u32_e32 v4, vcc, s0, v0
	s_movk_i32 s0, 0x5000
	s_nop 0
	v_addc_co_u32_e32 v5, vcc, 0, v1, vcc
	s_waitcnt vmcnt(0)
	v_mul_f32_e32 v3, v2, v3
	global_store_dword v[4:5], v3, off offset:-4096
	scratch_load_dword v3, off, off offset:4 ; 4-byte Folded Reload
	s_waitcnt vmcnt(0)
	v_mul_f32_e32 v3, v2, v3
	global_store_dword v[4:5], v3, off
	scratch_load_dword v3, off, off offset:44 ; 4-byte Folded Reload
	s_waitcnt vmcnt(0)
	v_mul_f32_e32 v3, v2, v3
	global_store_dword v[4:5], v3, off offset:1024
	v_mul_f32_e32 v3, v2, v21
	global_store_dword v[4:5], v3, off offset:2048
	scratch_load_dword v3, off, off offset:36 ; 4-byte Folded Reload
	s_waitcnt vmcnt(0)
	v_mul_f32_e32 v3, v2, v3
	global_store_dword v[4:5], v3, off offset:3072
	v_add_co_u32_e32 v4, vcc, s0, v0
	v_mul_f32_e32 v3, v2, v19
	s_nop 0
	v_addc_co_u32_e32 v5, vcc, 0, v1, vcc
	v_add_co_u32_e32 v14, vcc, s1, v0
	s_nop 1
	v_addc_co_u32_e32 v15, vcc, 0, v1, vcc
	global_store_dword v[14:15], v3, off offset:-4096
	scratch_load_dword v3, off, off offset:16 ; 4-byte Folded Reload
	v_add_co_u32_e32 v0, vcc, 0x7000, v0
	s_waitcnt vmcnt(0)
	v_mul_f32_e32 v3, v2, v3
	global_store_dword v[4:5], v3, off offset:1024
	scratch_load_dword v3, off, off offset:12 ; 4-byte Folded Reload
	v_addc_co_u32_e32 v1, vcc, 0, v1, vcc
	s_waitcnt vmcnt(0)
	v_mul_f32_e32 v3, v2, v3
	global_store_dword v[4:5], v3, off offset:2048
	scratch_load_dword v3, off, off offset:8 ; 4-byte Folded Reload
	s_waitcnt vmcnt(0)
	v_mul_f32_e32 v3, v2, v3
	global_store_dword v[4:5], v3, off offset:3072
	scratch_load_dword v3, off, off offset:20 ; 4-byte Folded Reload
	s_waitcnt vmcnt(0)
	v_mul_f32_e32 v3, v2, v3
	global_store_dword v[14:15], v3, off
	v_mul_f32_e32 v3, v2, v7
	global_store_dword v[14:15], v3, off offset:1024
	v_mul_f32_e32 v3, v2, v8
	global_store_dword v[14:15], v3, off offset:2048
	v_mul_f32_e32 v3, v2, v6
	global_store_dword v[14:15], v3, off offset:3072
	v_mul_f32_e32 v3, v2, v9
	global_store_dword v[0:1], v3, off
	v_mul_f32_e32 v3, v2, v27
	global_store_dword v[0:1], v3, off offset:1024
	v_mul_f32_e32 v3, v2, v18
	v_mul_f32_e32 v2, v2, v20
	global_store_dword v[0:1], v3, off offset:2048
	global_store_dword v[0:1], v2, off offset:3072
	s_endpgm
	.section	.rodata,"a",@progbits
	.p2align	6, 0x0
	.amdhsa_kernel starved
		.amdhsa_group_segment_fixed_size 0
		.amdhsa_private_segment_fixed_size 76
		.amdhsa_kernarg_size 16
		.amdhsa_user_sgpr_count 2
		.amdhsa_user_sgpr_dispatch_ptr 0
		.amdhsa_user_sgpr_queue_ptr 0
		.amdhsa_user_sgpr_kernarg_segment_ptr 1
		.amdhsa_user_sgpr_dispatch_id 0
		.amdhsa_user_sgpr_kernarg_preload_length 0
		.amdhsa_user_sgpr_kernarg_preload_offset 0
		.amdhsa_user_sgpr_private_segment_size 0
		.amdhsa_uses_dynamic_stack 0
		.amdhsa_enable_private_segment 1
		.amdhsa_system_sgpr_workgroup_id_x 1
		.amdhsa_system_sgpr_workgroup_id_y 0
		.amdhsa_system_sgpr_workgroup_id_z 0
		.amdhsa_system_sgpr_workgroup_info 0
		.amdhsa_system_vgpr_workitem_id 0
		.amdhsa_next_free_vgpr 32
		.amdhsa_next_free_sgpr 4
		.amdhsa_accum_offset 32
		.amdhsa_reserve_vcc 1
		.amdhsa_float_round_mode_32 0
		.amdhsa_float_round_mode_16_64 0
		.amdhsa_float_denorm_mode_32 3
		.amdhsa_float_denorm_mode_16_64 3
		.amdhsa_dx10_clamp 1
		.amdhsa_ieee_mode 1
		.amdhsa_fp16_overflow 0
		.amdhsa_tg_split 0
		.amdhsa_exception_fp_ieee_invalid_op 0
		.amdhsa_exception_fp_denorm_src 0
		.amdhsa_exception_fp_ieee_div_zero 0
		.amdhsa_exception_fp_ieee_overflow 0
		.amdhsa_exception_fp_ieee_underflow 0
		.amdhsa_exception_fp_ieee_inexact 0
		.amdhsa_exception_int_div_zero 0
	.end_amdhsa_kernel
	.text
.Lfunc_end0:
	.size	starved, .Lfunc_end0-starved
                                        ; -- End function
	.set starved.num_vgpr, 32
	.set starved.num_agpr, 0
	.set starved.numbered_sgpr, 4
	.set starved.num_named_barrier, 0
	.set starved.private_seg_size, 76
	.set starved.uses_vcc, 1
	.set starved.uses_flat_scratch, 0
	.set starved.has_dyn_sized_stack, 0
	.set starved.has_recursion, 0
	.set starved.has_indirect_call, 0
	.section	.AMDGPU.csdata,"",@progbits
; Kernel info:
; codeLenInByte = 1528
; TotalNumSgprs: 10
; NumVgprs: 32
; NumAgprs: 0
; TotalNumVgprs: 32
; ScratchSize: 76
; MemoryBound: 0
; FloatMode: 240
; IeeeMode: 1
; LDSByteSize: 0 bytes/workgroup (compile time only)
; SGPRBlocks: 1
; VGPRBlocks: 3
; NumSGPRsForWavesPerEU: 10
; NumVGPRsForWavesPerEU: 32
; AccumOffset: 32
; Occupancy: 8
; WaveLimiterHint : 1
; COMPUTE_PGM_RSRC2:SCRATCH_EN: 1
; COMPUTE_PGM_RSRC2:USER_SGPR: 2
; COMPUTE_PGM_RSRC2:TRAP_HANDLER: 0
; COMPUTE_PGM_RSRC2:TGID_X_EN: 1
; COMPUTE_PGM_RSRC2:TGID_Y_EN: 0
; COMPUTE_PGM_RSRC2:TGID_Z_EN: 0
; COMPUTE_PGM_RSRC2:TIDIG_COMP_CNT: 0
; COMPUTE_PGM_RSRC3_GFX90A:ACCUM_OFFSET: 7
; COMPUTE_PGM_RSRC3_GFX90A:TG_SPLIT: 0
	.text
	.protected	sum4                    ; -- Begin function sum4
	.globl	sum4
	.p2align	8
	.type	sum4,@function
sum4:                                   ; @sum4
; %bb.0:
	s_load_dwordx4 s[4:7], s[0:1], 0x0
	v_lshl_add_u32 v0, s2, 8, v0
	v_ashrrev_i32_e32 v1, 31, v0
	v_lshlrev_b64 v[8:9], 4, v[0:1]
	s_waitcnt lgkmcnt(0)
	v_lshl_add_u64 v[10:11], s[4:5], 0, v[8:9]
	v_add_co_u32_e32 v12, vcc, 0x100000, v10
	v_lshl_add_u64 v[8:9], s[6:7], 0, v[8:9]
	s_nop 0
	v_addc_co_u32_e32 v13, vcc, 0, v11, vcc
	global_load_dwordx4 v[0:3], v[10:11], off
	global_load_dwordx4 v[4:7], v[12:13], off
	s_waitcnt vmcnt(0)
	v_pk_add_f32 v[0:1], v[0:1], v[4:5]
	v_pk_add_f32 v[2:3], v[2:3], v[6:7]
	global_store_dwordx4 v[8:9], v[0:3], off
	s_endpgm
	.section	.rodata,"a",@progbits
	.p2align	6, 0x0
	.amdhsa_kernel sum4
		.amdhsa_group_segment_fixed_size 0
		.amdhsa_private_segment_fixed_size 0
		.amdhsa_kernarg_size 16
		.amdhsa_user_sgpr_count 2
		.amdhsa_user_sgpr_dispatch_ptr 0
		.amdhsa_user_sgpr_queue_ptr 0
		.amdhsa_user_sgpr_kernarg_segment_ptr 1
		.amdhsa_user_sgpr_dispatch_id 0
		.amdhsa_user_sgpr_kernarg_preload_length 0
		.amdhsa_user_sgpr_kernarg_preload_offset 0
		.amdhsa_user_sgpr_private_segment_size 0
		.amdhsa_uses_dynamic_stack 0
		.amdhsa_enable_private_segment 0
		.amdhsa_system_sgpr_workgroup_id_x 1
		.amdhsa_system_sgpr_workgroup_id_y 0
		.amdhsa_system_sgpr_workgroup_id_z 0
		.amdhsa_system_sgpr_workgroup_info 0
		.amdhsa_system_vgpr_workitem_id 0
		.amdhsa_next_free_vgpr 14
		.amdhsa_next_free_sgpr 8
		.amdhsa_accum_offset 16
		.amdhsa_reserve_vcc 1
		.amdhsa_float_round_mode_32 0
		.amdhsa_float_round_mode_16_64 0
		.amdhsa_float_denorm_mode_32 3
		.amdhsa_float_denorm_mode_16_64 3
		.amdhsa_dx10_clamp 1
		.amdhsa_ieee_mode 1
		.amdhsa_fp16_overflow 0
		.amdhsa_tg_split 0
		.amdhsa_exception_fp_ieee_invalid_op 0
		.amdhsa_exception_fp_denorm_src 0
		.amdhsa_exception_fp_ieee_div_zero 0
		.amdhsa_exception_fp_ieee_overflow 0
		.amdhsa_exception_fp_ieee_underflow 0
		.amdhsa_exception_fp_ieee_inexact 0
		.amdhsa_exception_int_div_zero 0
	.end_amdhsa_kernel
	.text
.Lfunc_end1:
	.size	sum4, .Lfunc_end1-sum4
                                        ; -- End function
	.set sum4.num_vgpr, 14
	.set sum4.num_agpr, 0
	.set sum4.numbered_sgpr, 8
	.set sum4.num_named_barrier, 0
	.set sum4.private_seg_size, 0
	.set sum4.uses_vcc, 1
	.set sum4.uses_flat_scratch, 0
	.set sum4.has_dyn_sized_stack, 0
	.set sum4.has_recursion, 0
	.set sum4.has_indirect_call, 0
	.section	.AMDGPU.csdata,"",@progbits
; Kernel info:
; codeLenInByte = 112
; TotalNumSgprs: 14
; NumVgprs: 14
; NumAgprs: 0
; TotalNumVgprs: 14
; ScratchSize: 0
; MemoryBound: 0
; FloatMode: 240
; IeeeMode: 1
; LDSByteSize: 0 bytes/workgroup (compile time only)
; SGPRBlocks: 1
; VGPRBlocks: 1
; NumSGPRsForWavesPerEU: 14
; NumVGPRsForWavesPerEU: 14
; AccumOffset: 16
; Occupancy: 8
; WaveLimiterHint : 1
; COMPUTE_PGM_RSRC2:SCRATCH_EN: 0
; COMPUTE_PGM_RSRC2:USER_SGPR: 2
; COMPUTE_PGM_RSRC2:TRAP_HANDLER: 0
; COMPUTE_PGM_RSRC2:TGID_X_EN: 1
; COMPUTE_PGM_RSRC2:TGID_Y_EN: 0
; COMPUTE_PGM_RSRC2:TGID_Z_EN: 0
; COMPUTE_PGM_RSRC2:TIDIG_COMP_CNT: 0
; COMPUTE_PGM_RSRC3_GFX90A:ACCUM_OFFSET: 3
; COMPUTE_PGM_RSRC3_GFX90A:TG_SPLIT: 0
	.text
	.p2alignl 6, 3212836864
	.fill 256, 4, 3212836864
	.section	.AMDGPU.gpr_maximums,"",@progbits
	.set amdgpu.max_num_vgpr, 0
	.set amdgpu.max_num_agpr, 0
	.set amdgpu.max_num_sgpr, 0
	.set amdgpu.max_num_named_barrier, 0
	.text
	.type	__hip_cuid_2a404ab497846632,@object ; @__hip_cuid_2a404ab497846632
	.section	.bss,"aw",@nobits
	.globl	__hip_cuid_2a404ab497846632
__hip_cuid_2a404ab497846632:
	.byte	0                               ; 0x0
	.size	__hip_cuid_2a404ab497846632, 1

	.ident	"clang version 22.1.8"
	.section	".note.GNU-stack","",@progbits
	.addrsig
	.addrsig_sym __hip_cuid_2a404ab497846632
	.amdgpu_metadata
---
amdhsa.kernels:
  - .agpr_count:     0
    .args:
      - .actual_access:  read_only
        .address_space:  global
        .offset:         0
        .size:           8
        .value_kind:     global_buffer
      - .actual_access:  write_only
        .address_space:  global
        .offset:         8
        .size:           8
        .value_kind:     global_buffer
    .group_segment_fixed_size: 0
    .kernarg_segment_align: 8
    .kernarg_segment_size: 16
    .max_flat_workgroup_size: 1024
    .name:           starved
    .private_segment_fixed_size: 76
    .sgpr_count:     10
    .sgpr_spill_count: 0
    .symbol:         starved.kd
    .uniform_work_group_size: 1
    .uses_dynamic_stack: false
    .vgpr_count:     32
    .vgpr_spill_count: 18
    .wavefront_size: 64
  - .agpr_count:     0
    .args:
      - .actual_access:  read_only
        .address_space:  global
        .offset:         0
        .size:           8
        .value_kind:     global_buffer
      - .actual_access:  write_only
        .address_space:  global
        .offset:         8
        .size:           8
        .value_kind:     global_buffer
    .group_segment_fixed_size: 0
    .kernarg_segment_align: 8
    .kernarg_segment_size: 16
    .max_flat_workgroup_size: 1024
    .name:           sum4
    .private_segment_fixed_size: 0
    .sgpr_count:     14
    .sgpr_spill_count: 0
    .symbol:         sum4.kd
    .uniform_work_group_size: 1
    .uses_dynamic_stack: false
    .vgpr_count:     14
    .vgpr_spill_count: 0
    .wavefront_size: 64
amdhsa.target:   amdgcn-amd-amdhsa--gfx950
amdhsa.version:
  - 1
  - 2
...

	.end_amdgpu_metadata
