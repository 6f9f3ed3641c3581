# Sourced by the lab's Nsight Compute scripts (lab/sgemm-counters, lab/gaps): the sections and metrics that the
# course's profile records (gemmlab.profile.KEEP) read. A script appends what it needs beyond these.
SECTIONS="--section SpeedOfLight --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables"
SECTIONS+=" --section WarpStateStats --section LaunchStats --section Occupancy"
METRICS="l1tex__t_sector_hit_rate.pct,lts__t_sector_hit_rate.pct,dram__bytes_read.sum,dram__bytes_write.sum"
METRICS+=",l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"
METRICS+=",l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum,lts__t_sectors_srcunit_tex_op_read.sum"
METRICS+=",l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"
METRICS+=",smsp__inst_executed_op_shared_ld.sum,smsp__inst_executed_op_shared_st.sum"
METRICS+=",l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum"
METRICS+=",smsp__sass_thread_inst_executed_op_ffma_pred_on.sum,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active"
METRICS+=",smsp__inst_executed_op_global_ld.sum"
