
Í/device:GPU:0öStream #7(Kernel)Ë")¿Ñ=Äµ"*loop_fusion.1" *" d")ÄâzÄµ"*loop_fusion.1" *" e"*¿ç∑Äµ"*loop_fusion.1" *" f*correlation_id*
program_id*
hlo_op
	/host:CPU"corpus